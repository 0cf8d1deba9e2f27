//! The three update routes as a value: what routes by path (the local API,
//! its Runtime Interface Emulator mode, the tests, the benchmarks) goes
//! through [`Route`]. API Gateway's part, not a function's: each function
//! names its record kind in `main.rs` and needs no table.

use agent_server_shared::records::{ApiKey, Field, McpServer, Model, Resource};
use agent_server_shared::store::{Store, Table};
use agent_server_shared::{App, Request, Response, lambda};
use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use lambda_runtime::Context;
use serde_json::Value;

/// One update route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `PUT /api/agent-server/api-keys/{id}`, function `update-api-key`.
    ApiKeys,
    /// `PUT /api/agent-server/mcp-servers/{id}`, function `update-mcp-server`.
    McpServers,
    /// `PUT /api/agent-server/models/{id}`, function `update-model`.
    Models,
}

/// Runs `$body` with `$record` naming the route's record kind.
macro_rules! with_record {
    ($route:expr, $record:ident => $body:expr) => {
        match $route {
            Route::ApiKeys => {
                type $record = ApiKey;
                $body
            }
            Route::McpServers => {
                type $record = McpServer;
                $body
            }
            Route::Models => {
                type $record = Model;
                $body
            }
        }
    };
}

impl Route {
    /// Every route.
    pub const ALL: [Route; 3] = [Self::ApiKeys, Self::McpServers, Self::Models];

    /// The path template, `/api/agent-server/models/{id}`.
    pub fn template(self) -> &'static str {
        with_record!(self, R => R::ROUTE)
    }

    /// The collection segment of the path, `models`.
    pub fn collection(self) -> &'static str {
        let template = self.template().trim_end_matches("/{id}");
        template.rsplit('/').next().unwrap_or(template)
    }

    /// The route whose collection segment is `collection`.
    pub fn of_collection(collection: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|route| route.collection() == collection)
    }

    /// The Lambda function (and its binary) that serves the route.
    pub fn function(self) -> &'static str {
        with_record!(self, R => R::FUNCTION)
    }

    /// The table behind the route.
    pub fn table(self) -> Table {
        with_record!(self, R => R::TABLE)
    }

    /// The fields of the route's record kind.
    pub fn fields(self) -> &'static [Field] {
        with_record!(self, R => R::FIELDS)
    }

    /// The function's answer to a payload 2.0 `event`, exactly as its
    /// Lambda binary gives it ([`lambda::respond`]).
    pub async fn respond<S: Store>(
        self,
        app: &App<S>,
        event: Value,
        context: Context,
    ) -> ApiGatewayV2httpResponse {
        with_record!(self, R => lambda::respond::<R, S>(app, event, context).await)
    }

    /// Whether the route's function refuses the payload 2.0 `event` before
    /// it reads a body (for the record's key or the caller's grant, or an
    /// event it cannot read): the local API then sends it no body.
    pub fn refuses_before_body(self, settings: &agent_server_shared::Settings, event: &Value) -> bool {
        match Request::from_event(event.clone(), Context::default()) {
            Ok(request) => {
                with_record!(self, R => agent_server_shared::handler::refused_before_body::<R>(settings, &request))
            }
            Err(_) => true,
        }
    }

    /// The update of a request already read
    /// ([`agent_server_shared::handler::update_record`]).
    pub async fn update<S: Store>(self, app: &App<S>, request: Request) -> Response {
        with_record!(self, R => agent_server_shared::handler::update_record::<R, S>(app, request).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_has_its_own_names() {
        let collections: Vec<&str> = Route::ALL.iter().map(|r| r.collection()).collect();
        assert_eq!(collections, ["api-keys", "mcp-servers", "models"]);
        for route in Route::ALL {
            assert_eq!(Route::of_collection(route.collection()), Some(route));
            assert!(route.template().starts_with("/api/agent-server/"));
        }
        assert_eq!(Route::of_collection("model"), None);
    }
}
