//! The update routes as a value, one per record kind: what routes by path
//! (the local API, its Runtime Interface Emulator mode, the tests, the
//! benchmarks) goes through [`Route`]. API Gateway's part, not a function's: each function
//! names its record kind in `main.rs` and needs no table.

use agent_server_shared::records::Field;
use agent_server_shared::store::{Store, Table};
use agent_server_shared::{App, Request, Response, lambda, with_resource};
use aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use lambda_runtime::Context;
use serde_json::Value;

/// One update route: that of a record kind ([`Table`], the one list of
/// them), read from its declaration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route(pub Table);

impl Route {
    /// Every route, in the record kinds' order.
    pub const ALL: [Route; Table::ALL.len()] = {
        let mut all = [Route(Table::ALL[0]); Table::ALL.len()];
        let mut index = 0;
        while index < all.len() {
            all[index] = Route(Table::ALL[index]);
            index += 1;
        }
        all
    };

    /// The path template, `/api/agent-server/models/{id}`.
    pub fn template(self) -> &'static str {
        self.0.route()
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
        self.0.function()
    }

    /// The table behind the route.
    pub fn table(self) -> Table {
        self.0
    }

    /// The fields of the route's record kind.
    pub fn fields(self) -> &'static [Field] {
        self.0.fields()
    }

    /// The function's answer to a payload 2.0 `event`, exactly as its
    /// Lambda binary gives it ([`lambda::respond`]).
    pub async fn respond<S: Store>(
        self,
        app: &App<S>,
        event: Value,
        context: Context,
    ) -> ApiGatewayV2httpResponse {
        with_resource!(self.0, R => lambda::respond::<R, S>(app, event, context).await)
    }

    /// Whether the route's function refuses the payload 2.0 `event` before
    /// it reads a body (for the record's key or the caller's grant, or an
    /// event it cannot read): the local API then sends it no body.
    pub fn refuses_before_body(self, settings: &agent_server_shared::Settings, event: &Value) -> bool {
        match Request::from_event(event.clone(), Context::default()) {
            Ok(request) => {
                with_resource!(self.0, R => agent_server_shared::handler::refused_before_body::<R>(settings, &request))
            }
            Err(_) => true,
        }
    }

    /// The update of a request already read
    /// ([`agent_server_shared::handler::update_record`]).
    pub async fn update<S: Store>(self, app: &App<S>, request: Request) -> Response {
        with_resource!(self.0, R => agent_server_shared::handler::update_record::<R, S>(app, request).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_route_has_its_own_names() {
        let collections: Vec<&str> = Route::ALL.iter().map(|r| r.collection()).collect();
        let distinct: std::collections::BTreeSet<&str> = collections.iter().copied().collect();
        assert_eq!(distinct.len(), collections.len(), "{collections:?}");
        assert!(collections.contains(&"models"), "{collections:?}");
        for route in Route::ALL {
            assert_eq!(Route::of_collection(route.collection()), Some(route));
            assert!(route.template().starts_with("/api/agent-server/"));
        }
        assert_eq!(Route::of_collection("model"), None);
    }
}
