//! Everything the three agent-server update functions have in common.
//!
//! A request flows through [`handler::update_record`]: [`request`] extracts the id,
//! `project_id`, `If-Match` and the JSON body; [`patch`] checks every field
//! against the [`rules`] of its [`records::Resource`]; [`auth`] checks the
//! caller may change the record's project; [`seal`] encrypts a secret
//! field with KMS; one [`store::Store`] call writes it; [`envelope`] renders the outcome, and [`error::ApiError`]
//! is the single place where a failure becomes a status code.

pub mod app;
pub mod auth;
pub mod budget;
pub mod config;
pub mod envelope;
pub mod error;
pub mod handler;
pub mod ids;
pub mod item;
pub mod json;
pub mod lambda;
pub mod logging;
pub mod metrics;
pub mod patch;
pub mod provider;
pub mod records;
pub mod request;
pub mod routes;
pub mod rules;
pub mod seal;
pub mod store;

pub use app::App;
pub use config::Settings;
pub use error::{ApiError, FieldError};
pub use handler::update_record;
pub use provider::ProviderType;
pub use records::{ApiKey, McpServer, Model, Resource};
pub use routes::Route;
pub use store::{Store, Table};

/// The request type every handler takes: `lambda_http`'s, so the Lambda
/// binaries and the local API run literally the same code.
pub type Request = lambda_http::Request;
/// The response type every handler returns.
pub type Response = lambda_http::Response<lambda_http::Body>;
