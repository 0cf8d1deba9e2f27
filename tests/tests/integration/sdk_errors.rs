//! How every DynamoDB and KMS failure the SDK can report becomes a store or
//! sealing outcome, with the SDK mocked (aws-smithy-mocks), and the exact
//! shape of the one UpdateItem request.

use agent_server_shared::Table;
use agent_server_shared::item::Kind;
use agent_server_shared::records::{Access, Field};
use agent_server_shared::rules::{MAX_TEXT_CHARS, Rule};
use agent_server_shared::seal::{KmsSealer, SealError};
use agent_server_shared::store::TableNames;
use agent_server_shared::store::{DynamoStore, Key, Store, StoreError, Update};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::error::{
    ConditionalCheckFailedException, InternalServerError, ProvisionedThroughputExceededException,
    RequestLimitExceeded, ResourceNotFoundException, ThrottlingException, TransactionConflictException,
};
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure};
use aws_smithy_mocks::{RuleMode, mock, mock_client};
use aws_smithy_runtime_api::http::StatusCode;
use aws_smithy_types::body::SdkBody;

/// A record kind of fixed shape (the model's, when this was written), so the
/// expected expression below does not change when a record kind gains a field.
const FIELDS: &[Field] = &[
    Field {
        name: "id",
        access: Access::Key,
        kind: Kind::String,
    },
    Field {
        name: "project_id",
        access: Access::Key,
        kind: Kind::String,
    },
    Field {
        name: "name",
        access: Access::Set(Rule::Text { max: MAX_TEXT_CHARS }),
        kind: Kind::String,
    },
    Field {
        name: "model_id",
        access: Access::Set(Rule::Text { max: MAX_TEXT_CHARS }),
        kind: Kind::String,
    },
    Field {
        name: "provider_type",
        access: Access::Set(Rule::Provider),
        kind: Kind::String,
    },
    Field {
        name: "parameters",
        access: Access::Set(Rule::Parameters),
        kind: Kind::Map,
    },
    Field {
        name: "created_at",
        access: Access::ReadOnly,
        kind: Kind::String,
    },
    Field {
        name: "updated_at",
        access: Access::Stamp,
        kind: Kind::String,
    },
];

fn update(expected_versions: Option<Vec<u64>>) -> Update {
    Update {
        table: Table::Models,
        key: Key {
            project_id: Some("p".into()),
            id: "i".into(),
        },
        set: vec![
            ("name", agent_server_shared::item::Attr::S("n".into())),
            (
                "parameters",
                agent_server_shared::item::Attr::M(Default::default()),
            ),
        ]
        .into(),
        remove: Vec::new(),
        expected_versions,
        none_match: None,
        unmodified_before: None,
        now: "2026-11-21T14:55:00.123Z".into(),
        write_id: Update::new_write_id(),
        fields: FIELDS,
        updated_by: None,
        budget: agent_server_shared::budget::TIME_BUDGET,
        unchanged: Vec::new(),
    }
}

async fn outcome_of(error: impl Fn() -> UpdateItemError + Send + Sync + 'static) -> Result<(), StoreError> {
    let rule = mock!(Client::update_item).then_error(error);
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule]);
    DynamoStore::new(client, TableNames::default())
        .update(update(None))
        .await
        .map(|_| ())
}

#[tokio::test]
async fn a_failed_existence_check_without_an_old_item_is_not_found() {
    let outcome = outcome_of(|| {
        UpdateItemError::ConditionalCheckFailedException(ConditionalCheckFailedException::builder().build())
    })
    .await;
    assert_eq!(outcome, Err(StoreError::NotFound(Table::Models)));
}

#[tokio::test]
async fn a_failed_check_with_an_old_item_is_a_version_mismatch() {
    let outcome = outcome_of(|| {
        UpdateItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder()
                .item("id", AttributeValue::S("i".into()))
                .item("version", AttributeValue::N("5".into()))
                .build(),
        )
    })
    .await;
    assert_eq!(outcome, Err(StoreError::VersionMismatch { current: "5".into() }));
    let no_version = outcome_of(|| {
        UpdateItemError::ConditionalCheckFailedException(
            ConditionalCheckFailedException::builder()
                .item("id", AttributeValue::S("i".into()))
                .build(),
        )
    })
    .await;
    assert_eq!(
        no_version,
        Err(StoreError::VersionMismatch { current: "0".into() })
    );
}

#[tokio::test]
async fn throttling_and_transient_service_errors_are_unavailable() {
    let cases: Vec<Box<dyn Fn() -> UpdateItemError + Send + Sync>> = vec![
        Box::new(|| {
            UpdateItemError::ProvisionedThroughputExceededException(
                ProvisionedThroughputExceededException::builder()
                    .message("slow down")
                    .build(),
            )
        }),
        Box::new(|| UpdateItemError::ThrottlingException(ThrottlingException::builder().build())),
        Box::new(|| UpdateItemError::RequestLimitExceeded(RequestLimitExceeded::builder().build())),
        Box::new(|| {
            UpdateItemError::InternalServerError(InternalServerError::builder().message("x").build())
        }),
    ];
    for case in cases {
        let outcome = outcome_of(case).await;
        assert!(matches!(outcome, Err(StoreError::Unavailable(_))), "{outcome:?}");
    }
    // A keyed update's transaction held the item: nothing written, and the
    // service sends the update again (writes.rs) rather than answering 503.
    let held = outcome_of(|| {
        UpdateItemError::TransactionConflictException(TransactionConflictException::builder().build())
    })
    .await;
    assert_eq!(held, Err(StoreError::Contended));
}

/// A bare HTTP answer of `status` with `body`, as a proxy or a load balancer
/// in front of the service might send.
fn raw(status: u16, body: &'static str) -> HttpResponse {
    HttpResponse::new(StatusCode::try_from(status).unwrap(), SdkBody::from(body))
}

/// Answers: a gateway's 502, 503 and 504 without an error code, a 500 with
/// an unknown code, a proxy's bare 429 and 408, a 400 without a code, a 403
/// with a refusal's code; and 400s with codes that only the SDK's own retry
/// classifier knows as throttling or transient (no list of ours names them).
const RAW_ANSWERS: [(u16, &str, bool); 12] = [
    (502, "", true),
    (503, "<html>Service Unavailable</html>", true),
    (504, "", true),
    (
        500,
        r#"{"__type":"SomethingNewException","message":"SENTINEL"}"#,
        true,
    ),
    (429, "Too Many Requests", true),
    (408, "", true),
    (400, "", false),
    (
        403,
        r#"{"__type":"AccessDeniedException","message":"SENTINEL"}"#,
        false,
    ),
    (
        400,
        r#"{"__type":"TooManyRequestsException","message":"SENTINEL"}"#,
        true,
    ),
    (
        400,
        r#"{"__type":"RequestThrottledException","message":"SENTINEL"}"#,
        true,
    ),
    (
        400,
        r#"{"__type":"RequestTimeoutException","message":"SENTINEL"}"#,
        true,
    ),
    (
        400,
        r#"{"__type":"ValidationException","message":"SENTINEL"}"#,
        false,
    ),
];

#[tokio::test]
async fn any_server_fault_is_unavailable_with_or_without_an_error_code() {
    for (status, body, unavailable) in RAW_ANSWERS {
        let rule = mock!(Client::update_item).then_http_response(move || raw(status, body));
        // One attempt: how the answer is classified, not the retries' backoff.
        let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule], |config| {
            config.retry_config(RetryConfig::disabled())
        });
        let outcome = DynamoStore::new(client, TableNames::default())
            .update(update(None))
            .await
            .map(|_| ());
        match outcome {
            Err(StoreError::Unavailable(reason)) if unavailable => assert!(!reason.contains("SENTINEL")),
            Err(StoreError::Internal(reason)) if !unavailable => assert!(!reason.contains("SENTINEL")),
            other => panic!("HTTP {status} {body:?}: expected unavailable={unavailable}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn kms_server_faults_are_unavailable_and_refusals_are_refused() {
    for (status, body, unavailable) in RAW_ANSWERS {
        let rule = mock!(aws_sdk_kms::Client::encrypt).then_http_response(move || raw(status, body));
        let client = mock_client!(aws_sdk_kms, RuleMode::MatchAny, [&rule], |config| {
            config.retry_config(RetryConfig::disabled())
        });
        let outcome = KmsSealer::new(client, "alias/k".into())
            .seal(
                &[("field", "api_key"), ("id", "i")],
                b"sk-1",
                agent_server_shared::budget::TIME_BUDGET,
            )
            .await;
        match outcome {
            Err(SealError::Unavailable(reason)) if unavailable => assert!(!reason.contains("SENTINEL")),
            Err(SealError::Refused(reason)) if !unavailable => assert!(!reason.contains("SENTINEL")),
            other => panic!("HTTP {status} {body:?}: expected unavailable={unavailable}, got {other:?}"),
        }
    }
    // As the SDK reads it off the wire: the code in the error's metadata.
    let internal_error = mock!(aws_sdk_kms::Client::encrypt).then_error(|| {
        aws_sdk_kms::operation::encrypt::EncryptError::KmsInternalException(
            aws_sdk_kms::types::error::KmsInternalException::builder()
                .meta(
                    aws_sdk_kms::error::ErrorMetadata::builder()
                        .code("KMSInternalException")
                        .build(),
                )
                .build(),
        )
    });
    let client = mock_client!(aws_sdk_kms, RuleMode::MatchAny, [&internal_error]);
    let outcome = KmsSealer::new(client, "alias/k".into())
        .seal(
            &[("field", "api_key"), ("id", "i")],
            b"sk-1",
            agent_server_shared::budget::TIME_BUDGET,
        )
        .await;
    assert!(matches!(outcome, Err(SealError::Unavailable(_))), "{outcome:?}");
}

#[tokio::test]
async fn configuration_errors_are_internal_and_never_quote_the_service_message() {
    let outcome = outcome_of(|| {
        UpdateItemError::ResourceNotFoundException(
            ResourceNotFoundException::builder()
                .message("table agent-server-models SENTINEL")
                .build(),
        )
    })
    .await;
    match outcome {
        Err(StoreError::Internal(reason)) => assert!(!reason.contains("SENTINEL"), "{reason}"),
        other => panic!("expected internal, got {other:?}"),
    }
}

#[tokio::test]
async fn the_update_is_one_conditional_update_item_with_every_name_placeholdered() {
    let rule = mock!(Client::update_item)
        .match_requests(|request| {
            let names = request.expression_attribute_names().cloned().unwrap_or_default();
            let values = request.expression_attribute_values().cloned().unwrap_or_default();
            let expression = request.update_expression().unwrap_or_default();
            let condition = request.condition_expression().unwrap_or_default();
            // No attribute name appears bare: each is a #placeholder.
            let bare = [
                "name",
                "parameters",
                "updated_at",
                "version",
                "id",
                "model_id",
                "provider_type",
                "created_at",
                "write_id",
                "updated_by",
                "updated_fields",
            ]
            .iter()
            .any(|attribute| {
                [expression, condition].iter().any(|text| {
                    text.split(|c: char| !c.is_alphanumeric() && c != '_' && c != '#')
                        .any(|t| t == *attribute)
                })
            });
            let mut attributes: Vec<&str> = names.values().map(String::as_str).collect();
            attributes.sort_unstable();
            request.table_name() == Some("agent-server-models")
                && request
                    .key()
                    .is_some_and(|k| k.len() == 2 && k.contains_key("project_id") && k.contains_key("id"))
                && !bare
                && attributes
                    == [
                        "created_at",
                        "id",
                        "model_id",
                        "name",
                        "parameters",
                        "provider_type",
                        "updated_at",
                        "updated_by",
                        "updated_fields",
                        "version",
                        "write_id",
                    ]
                && expression.starts_with("SET ")
                && expression.contains("if_not_exists(#version, :zero) + :one")
                && expression.contains("#write_id = :this_write")
                // Who and which fields, by name only; no principal removes
                // the last caller's name.
                && expression.contains("#updated_fields = :fields_set")
                && expression.ends_with(" REMOVE #updated_by")
                && values.get(":fields_set")
                    == Some(&AttributeValue::Ss(vec!["name".into(), "parameters".into()]))
                // Exists, not already written by this update (a retried
                // attempt), can be returned afterwards (version in range,
                // each kept attribute of its type), and matches If-Match.
                && condition
                    == "attribute_exists(#id) AND (attribute_not_exists(#write_id) OR NOT (#write_id = :this_write)) \
                        AND (attribute_not_exists(#version) OR \
                        (attribute_type(#version, :type_N) AND #version BETWEEN :zero AND :max_version)) \
                        AND (attribute_not_exists(#r0) OR attribute_type(#r0, :type_S) OR attribute_type(#r0, :type_NULL)) \
                        AND (attribute_not_exists(#r1) OR attribute_type(#r1, :type_S) OR attribute_type(#r1, :type_NULL)) \
                        AND (attribute_not_exists(#r2) OR attribute_type(#r2, :type_S) OR attribute_type(#r2, :type_NULL)) \
                        AND (#version IN (:v1_0))"
                && values.get(":max_version") == Some(&AttributeValue::N(u64::MAX.saturating_sub(1).to_string()))
                && values.get(":v1_0") == Some(&AttributeValue::N("4".into()))
                && matches!(values.get(":this_write"), Some(AttributeValue::S(id)) if id.len() == 36)
                && request.return_values() == Some(&ReturnValue::AllNew)
                && request.return_values_on_condition_check_failure()
                    == Some(&ReturnValuesOnConditionCheckFailure::AllOld)
        })
        .then_output(|| {
            UpdateItemOutput::builder()
                .attributes("id", AttributeValue::S("i".into()))
                .attributes("version", AttributeValue::N("5".into()))
                .build()
        });
    let client = mock_client!(aws_sdk_dynamodb, RuleMode::MatchAny, [&rule]);
    let store = DynamoStore::new(client, TableNames::default());
    let item = store.update(update(Some(vec![4]))).await;
    assert!(
        item.is_ok(),
        "the request did not have the expected shape: {item:?}"
    );
    assert_eq!(rule.num_calls(), 1);
}
