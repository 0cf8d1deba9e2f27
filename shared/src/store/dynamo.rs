//! The DynamoDB store: one `UpdateItem` per update; with an idempotency
//! key, one `BatchGetItem` for the record and its key, and one
//! `TransactWriteItems` for the update and the outcome kept.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, KeysAndAttributes, Put, ReturnValue, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem,
};

use super::{
    Clause, Expected, Kept, Store, StoreError, UPDATED_BY, UPDATED_FIELDS, Update, WRITE_ID, judge, kept,
};
use crate::budget::{self, CallFailure, TIME_BUDGET};
use crate::item::{self, Attr, Item, MAX_VERSION};
use crate::store::{Key, Table, TableNames};
/// Stores records in DynamoDB tables.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: Client,
    tables: TableNames,
}

impl DynamoStore {
    /// Wraps a client built elsewhere.
    pub fn new(client: Client, tables: TableNames) -> Self {
        Self { client, tables }
    }

    /// Builds a client from the SDK's shared configuration (region,
    /// credentials, HTTP client, `AWS_ENDPOINT_URL_DYNAMODB`), with this
    /// service's retry and time budget.
    pub fn from_config(config: &aws_config::SdkConfig, tables: TableNames) -> Self {
        let client = Client::from_conf(Self::budgeted(aws_sdk_dynamodb::config::Builder::from(config)));
        Self::new(client, tables)
    }

    /// Applies this service's retry policy and time budget
    /// ([`crate::budget`]) to a client configuration.
    pub fn budgeted(config: aws_sdk_dynamodb::config::Builder) -> aws_sdk_dynamodb::Config {
        config
            .retry_config(budget::retry_config())
            .timeout_config(budget::timeout_config(TIME_BUDGET))
            .build()
    }

    /// The underlying client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The table names in use.
    pub fn tables(&self) -> &TableNames {
        &self.tables
    }
}

/// The expression parts of an update: every attribute goes through
/// `ExpressionAttributeNames`, so no field can collide with a reserved word.
struct Expression {
    update: String,
    condition: String,
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expression {
    /// The expression for `update`, whose stored item must have the types
    /// of `kept` (see [`Update::kept`]). Takes the update's values by value:
    /// a body's attributes are never copied.
    fn of(update: Update, clauses: &[Clause]) -> Self {
        let mut names = HashMap::new();
        let mut values = HashMap::new();
        let mut assignments = Vec::with_capacity(update.set.len() + 5);
        let fields = update.set_names();
        for (index, (name, value)) in update.set.into_iter().enumerate() {
            names.insert(format!("#f{index}"), name.to_string());
            values.insert(format!(":f{index}"), value.into());
            assignments.push(format!("#f{index} = :f{index}"));
        }
        names.insert("#id".into(), "id".into());
        names.insert("#updated_at".into(), "updated_at".into());
        names.insert("#version".into(), "version".into());
        names.insert("#write_id".into(), WRITE_ID.into());
        names.insert("#updated_by".into(), UPDATED_BY.into());
        names.insert("#updated_fields".into(), UPDATED_FIELDS.into());
        values.insert(":fields_set".into(), AttributeValue::Ss(fields));
        values.insert(":now".into(), AttributeValue::S(update.now));
        values.insert(":this_write".into(), AttributeValue::S(update.write_id));
        values.insert(":zero".into(), AttributeValue::N("0".into()));
        values.insert(":one".into(), AttributeValue::N("1".into()));
        assignments.push("#updated_at = :now".into());
        assignments.push("#version = if_not_exists(#version, :zero) + :one".into());
        assignments.push("#write_id = :this_write".into());
        assignments.push("#updated_fields = :fields_set".into());
        // A write by a caller with no principal must not leave the last
        // caller's name on the record.
        let mut removals: Vec<String> = Vec::new();
        for (index, name) in update.remove.iter().enumerate() {
            names.insert(format!("#x{index}"), (*name).to_string());
            removals.push(format!("#x{index}"));
        }
        match update.updated_by {
            Some(principal) => {
                values.insert(":caller".into(), AttributeValue::S(principal));
                assignments.push("#updated_by = :caller".into());
            }
            None => removals.push("#updated_by".into()),
        }
        // The item must exist and not hold this update's own write (a
        // retried attempt whose first try was applied fails here and is
        // answered from the old item); then each clause of the condition.
        let mut conditions = vec![
            "attribute_exists(#id) AND (attribute_not_exists(#write_id) OR NOT (#write_id = :this_write))"
                .to_string(),
        ];
        for (index, clause) in clauses.iter().enumerate() {
            conditions.push(render(index, clause, &mut names, &mut values));
        }
        let condition = conditions.join(" AND ");
        let removals = if removals.is_empty() {
            String::new()
        } else {
            format!(" REMOVE {}", removals.join(", "))
        };
        Self {
            update: format!("SET {}{removals}", assignments.join(", ")),
            condition,
            names,
            values,
        }
    }
}

/// `clause` (the `index`th of a condition) as DynamoDB's condition
/// expression states it, its names and values added to `names` and `values`
/// under placeholders of its own.
fn render(
    index: usize,
    clause: &Clause,
    names: &mut HashMap<String, String>,
    values: &mut HashMap<String, AttributeValue>,
) -> String {
    let mut type_value = |kind: &str| {
        let placeholder = format!(":type_{kind}");
        values.insert(placeholder.clone(), AttributeValue::S(kind.into()));
        placeholder
    };
    match clause {
        Clause::Readable(kept) => {
            let (n, null) = (type_value("N"), type_value("NULL"));
            let mut parts = vec![format!(
                "(attribute_not_exists(#version) OR (attribute_type(#version, {n}) AND #version BETWEEN :zero AND :max_version))"
            )];
            for (field, (name, kind)) in kept.iter().enumerate() {
                let placeholder = format!("#r{field}");
                names.insert(placeholder.clone(), (*name).to_string());
                let kind = type_value(kind.type_name());
                parts.push(format!(
                    "(attribute_not_exists({placeholder}) OR attribute_type({placeholder}, {kind}) OR attribute_type({placeholder}, {null}))"
                ));
            }
            values.insert(":max_version".into(), AttributeValue::N(MAX_VERSION.to_string()));
            parts.join(" AND ")
        }
        Clause::VersionIn(accepted) => {
            let mut either = Vec::with_capacity(2);
            if accepted.contains(&0) {
                either.push("attribute_not_exists(#version)".to_string());
            }
            if accepted.is_empty() {
                // No tag can match: compared with a string, which no
                // numeric version equals, the check fails and returns the
                // old item.
                values.insert(":never".into(), AttributeValue::S("never".into()));
                either.push("#version = :never".into());
            } else {
                either.push(format!("#version IN ({})", listed(index, "v", accepted, values)));
            }
            format!("({})", either.join(" OR "))
        }
        // The item must exist (above) and must not: no write.
        Clause::Absent => "attribute_not_exists(#id)".into(),
        Clause::VersionNotIn(refused) => {
            let listed = listed(index, "n", refused, values);
            if refused.contains(&0) {
                format!("attribute_exists(#version) AND NOT (#version IN ({listed}))")
            } else {
                format!("NOT (#version IN ({listed}))")
            }
        }
        Clause::UnmodifiedBefore(bound) => {
            values.insert(":unmodified_before".into(), AttributeValue::S(bound.clone()));
            "(attribute_not_exists(#updated_at) OR #updated_at < :unmodified_before)".into()
        }
        Clause::Unchanged(name, expected) => {
            let placeholder = format!("#u{index}");
            names.insert(placeholder.clone(), (*name).to_string());
            match expected {
                Expected::Absent => format!("attribute_not_exists({placeholder})"),
                Expected::AbsentOrEmpty => {
                    let map = type_value("M");
                    format!(
                        "(attribute_not_exists({placeholder}) OR (attribute_type({placeholder}, {map}) AND size({placeholder}) = :zero))"
                    )
                }
                // A NULL compares equal to nothing: its type says it.
                Expected::Is(Attr::Null) => {
                    let null = type_value("NULL");
                    format!("attribute_type({placeholder}, {null})")
                }
                // DynamoDB compares maps, sets and binaries by value.
                Expected::Is(value) => {
                    values.insert(format!(":u{index}"), value.clone().into());
                    format!("{placeholder} = :u{index}")
                }
            }
        }
    }
}

/// The placeholders of `versions` (`:{prefix}{index}_{n}`), added to `values`.
fn listed(
    index: usize,
    prefix: &str,
    versions: &[u64],
    values: &mut HashMap<String, AttributeValue>,
) -> String {
    let placeholders: Vec<String> = versions
        .iter()
        .enumerate()
        .map(|(n, version)| {
            let placeholder = format!(":{prefix}{index}_{n}");
            values.insert(placeholder.clone(), AttributeValue::N(version.to_string()));
            placeholder
        })
        .collect();
    placeholders.join(", ")
}

impl From<CallFailure> for StoreError {
    fn from(failure: CallFailure) -> Self {
        match failure {
            CallFailure::Unavailable(reason) => Self::Unavailable(reason),
            CallFailure::Refused(reason) => Self::Internal(reason),
        }
    }
}

/// A request the SDK's builder refused to build: a bug here, never input.
fn unbuildable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("request not built: {error}"))
}

/// A client call bounded by `budget`.
fn within(budget: Duration) -> aws_sdk_dynamodb::config::Builder {
    aws_sdk_dynamodb::config::Builder::new().timeout_config(budget::timeout_config(budget))
}

impl Store for DynamoStore {
    async fn read_keyed(
        &self,
        table: Table,
        key: &Key,
        kept_key: &str,
        budget: Duration,
    ) -> Result<(Option<Item>, Option<Kept>), StoreError> {
        if budget.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        let records = self.tables.name(table);
        let outcomes = &self.tables.idempotency;
        let keys = |key: HashMap<String, AttributeValue>| {
            KeysAndAttributes::builder()
                .keys(key)
                .consistent_read(true)
                .build()
                .map_err(unbuildable)
        };
        let kept_item_key = HashMap::from([(kept::KEY.to_string(), AttributeValue::S(kept_key.into()))]);
        let output = self
            .client
            .batch_get_item()
            .request_items(records, keys(item::to_sdk(key.attributes()))?)
            .request_items(outcomes, keys(kept_item_key)?)
            .customize()
            .config_override(within(budget))
            .send()
            .await;
        let output = output.map_err(|error| {
            StoreError::from(budget::failure(&error, |error| {
                matches!(
                    error,
                    BatchGetItemError::ProvisionedThroughputExceededException(_)
                        | BatchGetItemError::RequestLimitExceeded(_)
                        | BatchGetItemError::ThrottlingException(_)
                        | BatchGetItemError::InternalServerError(_)
                )
            }))
        })?;
        // Keys DynamoDB did not get to (throttled within the batch).
        if output
            .unprocessed_keys
            .as_ref()
            .is_some_and(|keys| !keys.is_empty())
        {
            return Err(StoreError::Unavailable(
                "BatchGetItem left keys unprocessed".into(),
            ));
        }
        let mut responses = output.responses.unwrap_or_default();
        let record = responses
            .remove(records)
            .and_then(|items| items.into_iter().next())
            .map(own)
            .transpose()?;
        let kept = match responses
            .remove(outcomes)
            .and_then(|items| items.into_iter().next())
        {
            None => None,
            Some(item) => Some(Kept::from_item(&own(item)?).ok_or_else(|| {
                StoreError::Unreadable("the outcome kept under the key is not one this service wrote".into())
            })?),
        };
        Ok((record, kept))
    }

    async fn update_keeping(&self, update: Update, kept: Kept) -> Result<(), StoreError> {
        let kind = update.table;
        let clauses = update.clauses();
        let write_id = update.write_id.clone();
        let time = update.budget;
        if time.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        let key = item::to_sdk(update.key.attributes());
        let expression = Expression::of(update, &clauses);
        let record = aws_sdk_dynamodb::types::Update::builder()
            .table_name(self.tables.name(kind))
            .set_key(Some(key))
            .update_expression(expression.update)
            .condition_expression(expression.condition)
            .set_expression_attribute_names(Some(expression.names))
            .set_expression_attribute_values(Some(expression.values))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(unbuildable)?;
        // Kept unless an unexpired outcome is kept under the key already.
        let outcome = Put::builder()
            .table_name(&self.tables.idempotency)
            .set_item(Some(item::to_sdk(kept.to_item())))
            .condition_expression("attribute_not_exists(#key) OR #expires_at <= :kept_at")
            .expression_attribute_names("#key", kept::KEY)
            .expression_attribute_names("#expires_at", kept::EXPIRES_AT)
            .expression_attribute_values(":kept_at", AttributeValue::N(kept.kept_at.to_string()))
            .build()
            .map_err(unbuildable)?;
        let result = self
            .client
            .transact_write_items()
            .transact_items(TransactWriteItem::builder().update(record).build())
            .transact_items(TransactWriteItem::builder().put(outcome).build())
            // The SDK's retry of an applied transaction is answered as a
            // success instead of applied again.
            .client_request_token(&write_id)
            .customize()
            .config_override(within(time))
            .send()
            .await;
        let Err(error) = result else {
            return Ok(());
        };
        if let SdkError::ServiceError(context) = &error
            && let TransactWriteItemsError::TransactionCanceledException(canceled) = context.err()
        {
            let reasons = canceled.cancellation_reasons();
            let code = |n: usize| reasons.get(n).and_then(|reason| reason.code());
            return match (code(0), code(1)) {
                (Some("ConditionalCheckFailed"), _) => match reasons.first().and_then(|reason| reason.item())
                {
                    Some(old) if sdk_written_by(old, &write_id) => Ok(()),
                    Some(old) => Err(judge(&clauses, &own(old.clone())?)
                        .err()
                        .unwrap_or(StoreError::Contended)),
                    // Missing, or DynamoDB kept the item to itself: a read tells.
                    None => Err(StoreError::Contended),
                },
                (_, Some("ConditionalCheckFailed")) => Err(StoreError::KeyTaken),
                (Some("TransactionConflict"), _) | (_, Some("TransactionConflict")) => {
                    Err(StoreError::Contended)
                }
                _ => {
                    let codes: Vec<&str> = reasons.iter().filter_map(|reason| reason.code()).collect();
                    let throttled = codes.iter().any(|code| {
                        matches!(
                            *code,
                            "ThrottlingError" | "ProvisionedThroughputExceeded" | "RequestLimitExceeded"
                        )
                    });
                    let reason = format!("transaction canceled: {}", codes.join(", "));
                    // A ValidationError (an item past 400 KB, say) is no
                    // better on a retry: a 500 that says so, not a 503.
                    Err(if throttled {
                        StoreError::Unavailable(reason)
                    } else {
                        StoreError::Internal(reason)
                    })
                }
            };
        }
        Err(StoreError::from(budget::failure(&error, |error| {
            matches!(
                error,
                TransactWriteItemsError::ProvisionedThroughputExceededException(_)
                    | TransactWriteItemsError::RequestLimitExceeded(_)
                    | TransactWriteItemsError::ThrottlingException(_)
                    | TransactWriteItemsError::InternalServerError(_)
                    | TransactWriteItemsError::TransactionInProgressException(_)
            )
        })))
    }

    async fn read(&self, table: Table, key: &Key, budget: Duration) -> Result<Option<Item>, StoreError> {
        if budget.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        let output = self
            .client
            .get_item()
            .table_name(self.tables.name(table))
            .set_key(Some(item::to_sdk(key.attributes())))
            .consistent_read(true)
            .customize()
            .config_override(
                aws_sdk_dynamodb::config::Builder::new().timeout_config(budget::timeout_config(budget)),
            )
            .send()
            .await;
        match output {
            Ok(output) => output.item.map(own).transpose(),
            Err(error) => Err(StoreError::from(budget::failure(&error, |error| {
                matches!(
                    error,
                    GetItemError::ProvisionedThroughputExceededException(_)
                        | GetItemError::RequestLimitExceeded(_)
                        | GetItemError::ThrottlingException(_)
                        | GetItemError::InternalServerError(_)
                )
            }))),
        }
    }

    async fn update(&self, update: Update) -> Result<Item, StoreError> {
        let kind = update.table;
        let table = self.tables.name(kind);
        let key = item::to_sdk(update.key.attributes());
        // The condition, stated once: rendered for DynamoDB, and what
        // explains a refused write.
        let clauses = update.clauses();
        let write_id = update.write_id.clone();
        let time = update.budget;
        if time.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        let expression = Expression::of(update, &clauses);
        let request = self
            .client
            .update_item()
            .table_name(table)
            .set_key(Some(key))
            .update_expression(expression.update)
            .condition_expression(expression.condition)
            .set_expression_attribute_names(Some(expression.names))
            .set_expression_attribute_values(Some(expression.values))
            .return_values(ReturnValue::AllNew)
            // The old item tells "missing" from "changed" without a second read.
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld);
        // What an earlier call of the request (sealing) left of the budget.
        let result = if time < TIME_BUDGET {
            let budget =
                aws_sdk_dynamodb::config::Builder::new().timeout_config(budget::timeout_config(time));
            request.customize().config_override(budget).send().await
        } else {
            request.send().await
        };
        match result {
            Ok(output) => applied(
                output
                    .attributes
                    .ok_or_else(|| StoreError::Internal("UpdateItem returned no attributes".into()))?,
            ),
            Err(error) => classify(error, kind, &clauses, &write_id),
        }
    }
}

/// Maps an SDK failure to what the caller can do about it. Only error
/// codes and kinds are kept: service messages may quote request values.
/// A refused write is explained from the old item by the clauses the
/// condition was rendered from ([`judge`]); one whose old item carries the
/// update's `write_id` is its own earlier attempt, applied: a success.
fn classify(
    error: SdkError<UpdateItemError, HttpResponse>,
    table: Table,
    clauses: &[Clause],
    write_id: &str,
) -> Result<Item, StoreError> {
    // A transaction (a keyed update's) held the item: nothing was written,
    // and the update may be sent again.
    if let SdkError::ServiceError(context) = &error
        && let UpdateItemError::TransactionConflictException(_) = context.err()
    {
        return Err(StoreError::Contended);
    }
    // The old item tells which part of the condition failed.
    if let SdkError::ServiceError(context) = &error
        && let UpdateItemError::ConditionalCheckFailedException(failure) = context.err()
    {
        return match &failure.item {
            None => Err(StoreError::NotFound(table)),
            Some(old) if sdk_written_by(old, write_id) => applied(old.clone()),
            // The rule lets it through only where the two statements of it
            // disagree: report the version, as a precondition would.
            Some(old) => {
                let old = own(old.clone())?;
                Err(judge(clauses, &old)
                    .err()
                    .unwrap_or_else(|| match item::version_tag(&old) {
                        Ok(current) => StoreError::VersionMismatch { current },
                        Err(error) => StoreError::Unreadable(error.to_string()),
                    }))
            }
        };
    }
    Err(StoreError::from(budget::failure(&error, transient)))
}

/// An item as the SDK read it, in the project's terms ([`item::Attr`]),
/// before anything was written.
fn own(item: HashMap<String, AttributeValue>) -> Result<Item, StoreError> {
    item::from_sdk(item).map_err(|error| StoreError::Unreadable(error.to_string()))
}

/// The item an applied update left, in the project's terms: one the
/// service cannot read is an error that says the write happened (not
/// [`StoreError::Unreadable`], which promises nothing was written).
fn applied(item: HashMap<String, AttributeValue>) -> Result<Item, StoreError> {
    item::from_sdk(item).map_err(|error| {
        StoreError::Internal(format!("the update was applied, but the item it left: {error}"))
    })
}

/// Whether the item as the SDK read it holds this update's own write: its
/// earlier attempt, applied (read before any conversion, so that an
/// attribute of a type the service cannot read does not hide it).
fn sdk_written_by(item: &HashMap<String, AttributeValue>, write_id: &str) -> bool {
    matches!(item.get(WRITE_ID), Some(AttributeValue::S(id)) if id == write_id)
}

/// Whether DynamoDB's answer means "try again later" beyond what the status
/// and the SDK say ([`budget::failure`]): a modelled throttling, conflict or
/// internal error.
fn transient(error: &UpdateItemError) -> bool {
    matches!(
        error,
        UpdateItemError::ProvisionedThroughputExceededException(_)
            | UpdateItemError::RequestLimitExceeded(_)
            | UpdateItemError::ThrottlingException(_)
            | UpdateItemError::InternalServerError(_)
            | UpdateItemError::TransactionConflictException(_)
            | UpdateItemError::ReplicatedWriteConflictException(_)
    )
}
