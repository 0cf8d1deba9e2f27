//! The DynamoDB store: one `UpdateItem` per update.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};

use super::{
    Expected, NoneMatch, Store, StoreError, UPDATED_BY, UPDATED_FIELDS, Update, WRITE_ID, written_by,
};
use crate::budget::{self, Failure, TIME_BUDGET};
use crate::item::{self, Item, Kind, MAX_VERSION};
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
    fn of(update: Update, kept: &[(&'static str, Kind)]) -> Self {
        let mut names = HashMap::new();
        let mut values = HashMap::new();
        let mut assignments = Vec::with_capacity(update.set.len() + 5);
        let fields = update.set_names();
        for (index, (name, value)) in update.set.into_iter().enumerate() {
            names.insert(format!("#f{index}"), name.to_string());
            values.insert(format!(":f{index}"), value);
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
        values.insert(":max_version".into(), AttributeValue::N(MAX_VERSION.to_string()));
        values.insert(":type_N".into(), AttributeValue::S("N".into()));
        values.insert(":type_NULL".into(), AttributeValue::S("NULL".into()));
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
        // What the write expects as it was read: equal (DynamoDB compares
        // maps and binaries by value), or absent (or empty).
        let mut unchanged = String::new();
        for (index, (name, expected)) in update.unchanged.into_iter().enumerate() {
            names.insert(format!("#u{index}"), name.to_string());
            match expected {
                Expected::Absent => unchanged.push_str(&format!(" AND attribute_not_exists(#u{index})")),
                Expected::AbsentOrEmpty => {
                    values.insert(":type_M".into(), AttributeValue::S("M".into()));
                    unchanged.push_str(&format!(
                        " AND (attribute_not_exists(#u{index}) OR (attribute_type(#u{index}, :type_M) AND size(#u{index}) = :zero))"
                    ));
                }
                // A NULL compares equal to nothing: its type says it.
                Expected::Is(AttributeValue::Null(_)) => {
                    unchanged.push_str(&format!(" AND attribute_type(#u{index}, :type_NULL)"));
                }
                Expected::Is(value) => {
                    values.insert(format!(":u{index}"), value);
                    unchanged.push_str(&format!(" AND #u{index} = :u{index}"));
                }
            }
        }

        // The item must exist, not hold this update's own write (a retried
        // attempt whose first try was applied fails here and is answered
        // from the old item), and be one the service can return afterwards
        // (item::updatable says the same in Rust): a version in range, and
        // every attribute the response shows, unless this write replaces
        // it, of its type.
        let mut condition = String::from(
            "attribute_exists(#id) AND (attribute_not_exists(#write_id) OR NOT (#write_id = :this_write)) \
             AND (attribute_not_exists(#version) OR \
             (attribute_type(#version, :type_N) AND #version BETWEEN :zero AND :max_version))",
        );
        for (index, (name, kind)) in kept.iter().enumerate() {
            names.insert(format!("#r{index}"), (*name).to_string());
            let type_value = format!(":type_{}", kind.type_name());
            values.insert(type_value.clone(), AttributeValue::S(kind.type_name().into()));
            condition.push_str(&format!(
                " AND (attribute_not_exists(#r{index}) OR attribute_type(#r{index}, {type_value}) \
                 OR attribute_type(#r{index}, :type_NULL))"
            ));
        }
        if let Some(expected) = &update.expected_versions {
            let mut accepted = Vec::with_capacity(2);
            if expected.contains(&0) {
                accepted.push("attribute_not_exists(#version)".to_string());
            }
            if !expected.is_empty() {
                let placeholders: Vec<String> = (0..expected.len()).map(|i| format!(":v{i}")).collect();
                for (placeholder, version) in placeholders.iter().zip(expected) {
                    values.insert(placeholder.clone(), AttributeValue::N(version.to_string()));
                }
                accepted.push(format!("#version IN ({})", placeholders.join(", ")));
            } else {
                // No tag can match: compare with a string, which no numeric
                // version equals, so the check fails and returns the old item.
                values.insert(":never".into(), AttributeValue::S("never".into()));
                accepted.push("#version = :never".into());
            }
            condition.push_str(&format!(" AND ({})", accepted.join(" OR ")));
        }
        match &update.none_match {
            // The item must exist (above) and must not: no write.
            Some(NoneMatch::Any) => condition.push_str(" AND attribute_not_exists(#id)"),
            Some(NoneMatch::Versions(refused)) if !refused.is_empty() => {
                let placeholders: Vec<String> = (0..refused.len()).map(|i| format!(":n{i}")).collect();
                for (placeholder, version) in placeholders.iter().zip(refused) {
                    values.insert(placeholder.clone(), AttributeValue::N(version.to_string()));
                }
                if refused.contains(&0) {
                    condition.push_str(" AND attribute_exists(#version)");
                }
                condition.push_str(&format!(" AND NOT (#version IN ({}))", placeholders.join(", ")));
            }
            Some(NoneMatch::Versions(_)) | None => {}
        }
        if let Some(bound) = &update.unmodified_before {
            values.insert(":unmodified_before".into(), AttributeValue::S(bound.clone()));
            condition
                .push_str(" AND (attribute_not_exists(#updated_at) OR #updated_at < :unmodified_before)");
        }
        condition.push_str(&unchanged);
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

impl Store for DynamoStore {
    async fn read(&self, table: Table, key: &Key, budget: Duration) -> Result<Option<Item>, StoreError> {
        if budget.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        let output = self
            .client
            .get_item()
            .table_name(self.tables.name(table))
            .set_key(Some(key.attributes()))
            .consistent_read(true)
            .customize()
            .config_override(
                aws_sdk_dynamodb::config::Builder::new().timeout_config(budget::timeout_config(budget)),
            )
            .send()
            .await;
        match output {
            Ok(output) => Ok(output.item),
            Err(error) => Err(
                match budget::failure(&error, |error| {
                    matches!(
                        error,
                        GetItemError::ProvisionedThroughputExceededException(_)
                            | GetItemError::RequestLimitExceeded(_)
                            | GetItemError::ThrottlingException(_)
                            | GetItemError::InternalServerError(_)
                    )
                }) {
                    Failure::Unavailable(reason) => StoreError::Unavailable(reason),
                    Failure::Refused(reason) => StoreError::Internal(reason),
                },
            ),
        }
    }

    async fn update(&self, update: Update) -> Result<Item, StoreError> {
        let kept = update.kept();
        let table = self.tables.name(update.table);
        let key = update.key.attributes();
        // What explains a refused write: the update without its values.
        let conditions = update.conditions();
        let time = update.budget;
        if time.is_zero() {
            return Err(StoreError::Unavailable("time budget exhausted".into()));
        }
        let expression = Expression::of(update, &kept);
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
            Ok(output) => output
                .attributes
                .ok_or_else(|| StoreError::Internal("UpdateItem returned no attributes".into())),
            Err(error) => classify(error, &conditions),
        }
    }
}

/// Maps an SDK failure to what the caller can do about it. Only error
/// codes and kinds are kept: service messages may quote request values.
/// A refused write is explained from the old item by the same rule the
/// condition states ([`Update::check`] of `update`, the update without its
/// values); one whose old item carries the update's `write_id` is its own
/// earlier attempt, applied: a success.
fn classify(error: SdkError<UpdateItemError, HttpResponse>, update: &Update) -> Result<Item, StoreError> {
    // The old item tells which part of the condition failed.
    if let SdkError::ServiceError(context) = &error
        && let UpdateItemError::ConditionalCheckFailedException(failure) = context.err()
    {
        return match &failure.item {
            None => Err(StoreError::NotFound),
            Some(old) if written_by(old, &update.write_id) => Ok(old.clone()),
            // The rule lets it through only where the two statements of it
            // disagree: report the version, as a precondition would.
            Some(old) => Err(update
                .check(old)
                .err()
                .unwrap_or_else(|| match item::version_tag(old) {
                    Ok(current) => StoreError::VersionMismatch { current },
                    Err(error) => StoreError::Unreadable(error.to_string()),
                })),
        };
    }
    Err(match budget::failure(&error, transient) {
        Failure::Unavailable(reason) => StoreError::Unavailable(reason),
        Failure::Refused(reason) => StoreError::Internal(reason),
    })
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
