"""Checks what cfn-lint and `sam validate` cannot. Translates template.yaml
with the SAM translator and, for an IAM deployment (the default), a JWT one
and a JWT one with route scopes, asserts that every route is integrated
with its own function and requires that authorization (the JWT audience,
and the scopes when given); that the template's Rules refuse a JWT issuer
without an audience and scopes without an issuer; that each function gets
PROJECTS_CLAIM, logs JSON at system level INFO to its own log group, and
has a role, written out in the template, that may call only
dynamodb:UpdateItem (and read-only DescribeTable) on its own table and
write logs only to its own group; that the API's stage writes a JSON access
log without query strings or bodies; and that alarms watch the API's 5xx,
every function's errors, throttles and duration (against its timeout) and
every table's throttles and system errors, notifying the alarm topic.

Dashboard: one AWS::CloudWatch::Dashboard showing, for every route, the
functions' EMF metrics from MetricsNamespace (Requests by Route and by
Route and Outcome, Latency p50/p99, DynamoDbLatency, KmsLatency, ColdStart),
API Gateway's Count, 4xx, 5xx and p50/p99 Latency and IntegrationLatency,
the init duration from the REPORT records, Lambda throttles, DynamoDB's
consumed write capacity and throttles per table, every alarm's state, and
the change events' dead-letter queue depth exactly when PublishChangeEvents.

Tracing: EnableTracing (default true) makes each function's tracing mode
Active, and only then may its role call xray:PutTraceSegments and
xray:PutTelemetryRecords, on "*" (X-Ray takes no resource); nothing else
is granted on "*".

Guards: the tables have deletion protection; each function's reserved
concurrency comes from ReservedConcurrency and is left out when that is
empty (0 would stop it; the parameter refuses 0); alarms fire on API
Gateway's p99 Latency above LatencyAlarmThresholdMs and on the API's 4xx
rate (metric math, 4xx / Count); every function gets METRICS_NAMESPACE
from MetricsNamespace (default AgentServer) for its EMF metrics.

Sealed secrets: the API-key function (and only it) gets SECRETS_KEY_ID, the
ARN of SecretsKey, a rotated KMS key of its own (never the tables' DataKey)
whose key policy keeps the account's administration statement and lets
decrypt only the roles of SecretReaderRoleArns (exact ARNs), only api_key
values; the function's role may kms:Encrypt on it only for the context
{"field": "api_key", "id": ...} (exactly those keys) and kms:DescribeKey,
and no function's role may kms:Decrypt (or re-encrypt) anything.

Change events (PublishChangeEvents): with it on, every table has a
NEW_IMAGE stream (none with it off) read by its own pipe, which keeps MODIFY
records only, builds each event's detail from an allow-list of the new
image's attributes and nothing else (the record's id, project, version and
updated_at, and the write's updated_by and the names in updated_fields,
rendered so that an item lacking those two still makes JSON that
events.schema.json accepts, as tools/events/pipes.py renders it), puts it on
the stack's bus with a fixed
source and detail type, never logs execution data, has no enrichment, gives
up after bounded retries into an encrypted dead-letter queue that an alarm
watches, and runs as a role of its own that may only read its table's stream
(and decrypt it through DynamoDB), put events on the bus and send to the
dead-letter queue. The audit trail exists with them: a rule on the bus
logs every change event (no replay), whole, to an audit log group (retained,
unnamed; the archive is not retained, its managed rule would keep the bus)
that
EventBridge and the log-delivery service may write to under the group's
resource policy (AWS's example, no condition; the rule's target the group's
own ARN, its failures alarmed), and an archive of the bus keeps the same events; both for
AuditRetentionDays (0, for ever, leaves the group's RetentionInDays out;
the parameter allows only values both accept), and outputs name them.

A self-test breaks the template in each of those ways (and in those below)
and makes sure the check notices.

Run with the tools virtualenv's Python: `make validate` does.
"""

import copy
import json
import logging
import os
import re
import sys

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

# Each translation leaves the translator's own usage metrics unpublished,
# and it warns about that; they are of no interest here.
logging.getLogger("samtranslator.metrics.metrics").setLevel(logging.ERROR)

ROUTES = {
    "/api/agent-server/api-keys/{id}": ("UpdateApiKeyFunction", "ApiKeysTable", "UpdateApiKeyLogs"),
    "/api/agent-server/mcp-servers/{id}": ("UpdateMcpServerFunction", "McpServersTable", "UpdateMcpServerLogs"),
    "/api/agent-server/models/{id}": ("UpdateModelFunction", "ModelsTable", "UpdateModelLogs"),
}

# What a function may do on its own table: the one write, plus read-only
# calls that touch no item (DescribeTable, to open the connection at init).
TABLE_ACTIONS = {"dynamodb:UpdateItem", "dynamodb:DescribeTable"}
# What it may do on its own log group, which the template creates: so never
# logs:CreateLogGroup, and never on any other group.
LOG_ACTIONS = {"logs:CreateLogStream", "logs:PutLogEvents"}


class NoManagedPolicies:
    def load(self):
        return {}


def resolve_if(value, conditions):
    """Resolves Fn::If the way CloudFormation will, for the given conditions."""
    if isinstance(value, dict):
        if set(value) == {"Fn::If"}:
            name, yes, no = value["Fn::If"]
            return resolve_if(yes if conditions[name] else no, conditions)
        return {k: resolve_if(v, conditions) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_if(v, conditions) for v in value]
    return value


def as_list(value):
    return value if isinstance(value, list) else [value]


NO_VALUE = {"Ref": "AWS::NoValue"}


def resolve(value, conditions):
    """Resolves Fn::If as resolve_if does, and drops what resolves to
    AWS::NoValue (a list item, an object's key), as CloudFormation does."""
    value = resolve_if(value, conditions)

    def drop(v):
        if isinstance(v, dict):
            return {k: drop(x) for k, x in v.items() if x != NO_VALUE}
        if isinstance(v, list):
            return [drop(x) for x in v if x != NO_VALUE]
        return v
    return drop(value)


def normalized(value):
    """A policy fragment compared by meaning: lists as sorted lists of
    their items, booleans and numbers as the strings IAM reads."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((normalized(v) for v in value), key=json.dumps)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


# The API-key function seals api_key: kms:Encrypt under the secrets key
# only for the context {"field": "api_key", "id": ...} (exactly those two
# keys: ForAllValues alone would pass an empty context, so id must be
# present too), and kms:DescribeKey on it to open the connection at init.
SECRETS_KEY = "SecretsKey"
TABLES_KEY = "DataKey"
SEALING_FUNCTION = "UpdateApiKeyFunction"
ENCRYPT_CONDITION = {
    "StringEquals": {"kms:EncryptionContext:field": "api_key"},
    "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": ["field", "id"]},
    "Null": {"kms:EncryptionContext:id": "false"},
}
SEAL_GRANTS = {"kms:Encrypt": ENCRYPT_CONDITION, "kms:DescribeKey": None}
# X-Ray's write actions take no resource: with tracing on, every function
# may call them on "*", and nothing else may be granted on "*".
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
TRACING_CONDITION = "TracingEnabled"


def check_function(resources, function, table, log_group, conditions=None):
    """The function logs JSON, START/REPORT records included, to its own group;
    its role, written in the template, may do nothing but TABLE_ACTIONS on
    its own table and LOG_ACTIONS on its own log group, plus, for the
    API-key function, SEAL_GRANTS on the secrets key (never kms:Decrypt),
    and XRAY_ACTIONS on "*" exactly when tracing is on."""
    conditions = conditions or {}
    problems = []
    properties = resources.get(function, {}).get("Properties", {})
    logging = properties.get("LoggingConfig", {})
    if logging.get("LogFormat") != "JSON" or logging.get("SystemLogLevel") != "INFO":
        problems.append(f"{function} must log JSON with SystemLogLevel INFO (START and REPORT records), has {logging}")
    if logging.get("LogGroup") != {"Ref": log_group}:
        problems.append(f"{function} must log to {log_group}, logs to {logging.get('LogGroup')}")
    if "RetentionInDays" not in resources.get(log_group, {}).get("Properties", {}):
        problems.append(f"{log_group} keeps logs forever (no RetentionInDays)")
    role_ref = properties.get("Role")
    if not (isinstance(role_ref, dict) and list(role_ref) == ["Fn::GetAtt"] and role_ref["Fn::GetAtt"][1] == "Arn"):
        return problems + [f"{function} must name its own role from the template, has {role_ref}"]
    role_name = role_ref["Fn::GetAtt"][0]
    role = resources.get(role_name, {})
    if role.get("Type") != "AWS::IAM::Role":
        return problems + [f"{function}'s role {role_name} is not an AWS::IAM::Role of the template"]
    users = [name for name, r in resources.items()
             if r["Type"] == "AWS::Lambda::Function" and r["Properties"].get("Role") == role_ref]
    if users != [function]:
        problems.append(f"{role_name} is shared by {users}")
    role = resolve(role.get("Properties", {}), conditions)
    if role.get("ManagedPolicyArns"):
        problems.append(f"{role_name} has managed policies {json.dumps(role['ManagedPolicyArns'])}")
    trust = role.get("AssumeRolePolicyDocument", {}).get("Statement", [])
    principals = [as_list(s.get("Principal", {}).get("Service")) for s in trust]
    if principals != [["lambda.amazonaws.com"]] or len(trust) != 1:
        problems.append(f"{role_name} may be assumed by {json.dumps([s.get('Principal') for s in trust])}")
    own_table = {"Fn::GetAtt": [table, "Arn"]}
    own_logs = {"Fn::GetAtt": [log_group, "Arn"]}
    secrets_key = {"Fn::GetAtt": [SECRETS_KEY, "Arn"]}
    tracing = conditions.get(TRACING_CONDITION, False)
    granted = set()
    for policy in role.get("Policies", []):
        for statement in as_list(policy["PolicyDocument"]["Statement"]):
            if statement.get("Effect") != "Allow":
                continue
            if set(statement) - {"Effect", "Action", "Resource", "Sid", "Condition"}:
                problems.append(f"{role_name} has a statement with {sorted(statement)}: {json.dumps(statement)}")
            actions = as_list(statement.get("Action", []))
            resources_of = as_list(statement.get("Resource", []))
            condition = statement.get("Condition")
            for action in actions:
                if action in TABLE_ACTIONS or action in LOG_ACTIONS:
                    target, expected_condition = (own_table if action in TABLE_ACTIONS else own_logs), None
                elif action in SEAL_GRANTS and function == SEALING_FUNCTION:
                    target, expected_condition = secrets_key, SEAL_GRANTS[action]
                elif action in XRAY_ACTIONS and tracing:
                    target, expected_condition = "*", None
                elif action in SEAL_GRANTS:
                    problems.append(f"{role_name} may call {action}, which only {SEALING_FUNCTION} needs")
                    continue
                elif action in XRAY_ACTIONS:
                    problems.append(f"{role_name} may call {action} with tracing off")
                    continue
                elif action.lower() in ("kms:decrypt", "kms:*", "*") or action.lower().startswith("kms:re"):
                    problems.append(f"{role_name} may call {action}: no function may decrypt a secret")
                    continue
                else:
                    problems.append(f"{role_name} may call {action}, which no function needs")
                    continue
                if resources_of != [target]:
                    problems.append(f"{role_name} may call {action} on {json.dumps(resources_of)}, "
                                    f"not only on {json.dumps(target)}")
                elif normalized(condition) != normalized(expected_condition):
                    problems.append(f"{role_name} may call {action} under {json.dumps(condition)}, "
                                    f"not only under {json.dumps(expected_condition)}")
                else:
                    granted.add(action)
            if "*" in resources_of and not set(actions) <= XRAY_ACTIONS:
                problems.append(f"{role_name} grants {actions} on \"*\"; only {sorted(XRAY_ACTIONS)} may be")
    needed = {"dynamodb:UpdateItem"} | LOG_ACTIONS
    if function == SEALING_FUNCTION:
        needed |= set(SEAL_GRANTS)
    if tracing:
        needed |= XRAY_ACTIONS
    missing = needed - granted
    if missing:
        problems.append(f"{role_name} lacks {sorted(missing)} (on its own table, log group, the secrets key, "
                        "or \"*\" for X-Ray)")
    return problems


def check_no_other_iam(resources):
    """No policy attaches itself to a role from outside it."""
    return [f"{name} ({r['Type']}) grants permissions outside the functions' roles"
            for name, r in resources.items()
            if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy")]


# The deployments the check imagines: parameter values, and what each
# must produce. Lists are CommaDelimitedList values ([""] when left empty).
MODES = {
    "IAM mode": {"JwtIssuer": "", "JwtAudience": [""], "JwtScopes": [""]},
    "JWT mode": {"JwtIssuer": "https://issuer.example.com", "JwtAudience": ["agent-server"], "JwtScopes": [""]},
    "JWT mode with scopes": {
        "JwtIssuer": "https://issuer.example.com",
        "JwtAudience": ["agent-server"],
        "JwtScopes": ["agent-server/write"],
    },
}

# Parameter values CloudFormation must refuse (through the template's Rules),
# and values it must accept.
RULE_CASES = [
    ({"JwtIssuer": "", "JwtAudience": [""], "JwtScopes": [""]}, True),
    ({"JwtIssuer": "https://i.example", "JwtAudience": ["a"], "JwtScopes": [""]}, True),
    ({"JwtIssuer": "https://i.example", "JwtAudience": ["a", "b"], "JwtScopes": ["s"]}, True),
    ({"JwtIssuer": "https://i.example", "JwtAudience": [""], "JwtScopes": [""]}, False),
    ({"JwtIssuer": "https://i.example", "JwtAudience": ["a", ""], "JwtScopes": [""]}, False),
    ({"JwtIssuer": "", "JwtAudience": [""], "JwtScopes": ["s"]}, False),
]


def evaluate(expr, params, conditions):
    """Evaluates the condition and rule functions this template uses."""
    if isinstance(expr, list):
        return [evaluate(e, params, conditions) for e in expr]
    if not isinstance(expr, dict):
        return expr
    (name, arg), = expr.items()
    ev = lambda e: evaluate(e, params, conditions)  # noqa: E731
    if name == "Ref":
        return params[arg]
    if name == "Condition":
        return conditions[arg]
    if name == "Fn::Equals":
        return ev(arg[0]) == ev(arg[1])
    if name == "Fn::Not":
        return not ev(arg[0])
    if name == "Fn::And":
        return all(ev(a) for a in arg)
    if name == "Fn::Or":
        return any(ev(a) for a in arg)
    if name == "Fn::Join":
        return arg[0].join(ev(arg[1]))
    if name == "Fn::Contains":
        return ev(arg[1]) in ev(arg[0])
    if name == "Fn::EachMemberEquals":
        return all(member == ev(arg[1]) for member in ev(arg[0]))
    raise ValueError(f"the check cannot evaluate {name}")


def parameter_default(parameter):
    """A parameter's default as CloudFormation hands it to intrinsics: a
    string, or a list of strings for a CommaDelimitedList."""
    default = parameter.get("Default")
    if isinstance(default, bool):
        default = "true" if default else "false"
    elif isinstance(default, (int, float)):
        default = str(default)
    if parameter.get("Type") == "CommaDelimitedList" and isinstance(default, str):
        default = default.split(",")
    return default


def conditions_for(template, values):
    params = {name: parameter_default(p) for name, p in template.get("Parameters", {}).items()}
    params.update(values)
    conditions = {}
    for name, expr in template.get("Conditions", {}).items():  # each refers only to earlier ones here
        conditions[name] = evaluate(expr, params, conditions)
    return params, conditions


def rules_accept(template, values):
    params, conditions = conditions_for(template, values)
    for rule in template.get("Rules", {}).values():
        if "RuleCondition" in rule and not evaluate(rule["RuleCondition"], params, conditions):
            continue
        if not all(evaluate(a["Assert"], params, conditions) for a in rule.get("Assertions", [])):
            return False
    return True


def check_rules(template):
    problems = []
    for values, accepted in RULE_CASES:
        if rules_accept(template, values) != accepted:
            problems.append(f"parameters {values} are {'refused' if accepted else 'accepted'}, should be "
                            f"{'accepted' if accepted else 'refused (JwtAudience is required with JwtIssuer; JwtScopes needs JwtIssuer)'}")
    return problems


def check_routes(mode, template, resources, values):
    params, conditions = conditions_for(template, values)
    use_jwt = bool(params["JwtIssuer"])
    problems = []
    apis = [r for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Api"]
    if len(apis) != 1:
        return [f"expected one HTTP API, found {len(apis)}"]
    body = resolve_if(apis[0]["Properties"]["Body"], conditions)
    schemes = body.get("components", {}).get("securitySchemes", {})
    operations = {(path, method): op for path, ops in body["paths"].items() for method, op in ops.items()}
    if set(operations) != {(path, "put") for path in ROUTES}:
        problems.append(f"routes are {sorted(operations)}, expected PUT on {sorted(ROUTES)}")
    scopes = {"Ref": "JwtScopes"} if params["JwtScopes"] != [""] else []
    expected = [{"JwtAuthorizer": scopes}] if use_jwt else [{"AWS_IAM": []}]
    for (path, method), op in operations.items():
        security = op.get("security")
        if security != expected or list(expected[0])[0] not in schemes:
            problems.append(f"{method.upper()} {path} requires {json.dumps(security)}, expected {json.dumps(expected)}")
        integration = json.dumps(op.get("x-amazon-apigateway-integration", {}))
        function = ROUTES.get(path, ("?",))[0]
        if f"{function}.Arn" not in integration:
            problems.append(f"{path} is not integrated with {function}")
        if op.get("x-amazon-apigateway-integration", {}).get("payloadFormatVersion") != "2.0":
            problems.append(f"{path} does not use payload format 2.0")
    if use_jwt:
        jwt = schemes.get("JwtAuthorizer", {}).get("x-amazon-apigateway-authorizer", {})
        configuration = jwt.get("jwtConfiguration", {})
        if jwt.get("type") != "jwt" or configuration.get("issuer") != {"Ref": "JwtIssuer"}:
            problems.append("JwtAuthorizer is not a JWT authorizer with the JwtIssuer")
        if configuration.get("audience") != {"Ref": "JwtAudience"}:
            problems.append("JwtAuthorizer does not require the JwtAudience")
    return [f"{mode}: {p}" for p in problems]


def check_environment(template, resources):
    problems = []
    claim = template.get("Parameters", {}).get("JwtProjectsClaim", {})
    if claim.get("Default") != "projects":
        problems.append(f"JwtProjectsClaim must default to projects, is {claim}")
    namespace = template.get("Parameters", {}).get("MetricsNamespace", {})
    if namespace.get("Type") != "String" or namespace.get("Default") != "AgentServer":
        problems.append(f"MetricsNamespace must be a String defaulting to AgentServer, is {json.dumps(namespace)}")
    for function, _, _ in ROUTES.values():
        variables = resources.get(function, {}).get("Properties", {}).get("Environment", {}).get("Variables", {})
        if variables.get("PROJECTS_CLAIM") != {"Ref": "JwtProjectsClaim"}:
            problems.append(f"{function} does not get PROJECTS_CLAIM from JwtProjectsClaim")
        if variables.get("METRICS_NAMESPACE") != {"Ref": "MetricsNamespace"}:
            problems.append(f"{function} does not get METRICS_NAMESPACE from MetricsNamespace, has "
                            f"{json.dumps(variables.get('METRICS_NAMESPACE'))}")
        # As deployed: LocalKmsEndpoint (sam local only) left empty.
        deployed = resolve_if(variables, {"UseLocalKms": False, "UseLocalDynamoDb": False})
        sealing_key = deployed.get("SECRETS_KEY_ID")
        if deployed.get("AWS_ENDPOINT_URL_KMS") not in (None, {"Ref": "AWS::NoValue"}):
            problems.append(f"{function} gets AWS_ENDPOINT_URL_KMS as deployed; it is for sam local only")
        if function != SEALING_FUNCTION and variables.get("AWS_ENDPOINT_URL_KMS") is not None:
            problems.append(f"{function} gets AWS_ENDPOINT_URL_KMS, which only {SEALING_FUNCTION} may have")
        if function != SEALING_FUNCTION and sealing_key is not None:
            problems.append(f"{function} gets SECRETS_KEY_ID, which only {SEALING_FUNCTION} may have")
        if function == SEALING_FUNCTION and sealing_key != {"Fn::GetAtt": [SECRETS_KEY, "Arn"]}:
            problems.append(f"{function} must get SECRETS_KEY_ID, the ARN of {SECRETS_KEY} (not the tables' "
                            f"{TABLES_KEY}), has {json.dumps(sealing_key)}")
    return problems


KEY_ADMINISTRATION = {
    "Effect": "Allow",
    "Principal": {"AWS": {"Fn::Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}},
    "Action": "kms:*",
    "Resource": "*",
}
SECRET_READERS = {
    "Effect": "Allow",
    "Principal": {"AWS": "*"},
    "Action": "kms:Decrypt",
    "Resource": "*",
    "Condition": {
        "ArnEquals": {"aws:PrincipalArn": {"Ref": "SecretReaderRoleArns"}},
        "StringEquals": {"kms:EncryptionContext:field": "api_key"},
    },
}


def canonical_statement(statement):
    """A policy statement without its Sid, Action and Resource as lists."""
    statement = {k: v for k, v in statement.items() if k != "Sid"}
    for key in ("Action", "NotAction", "Resource", "NotResource"):
        if key in statement:
            statement[key] = as_list(statement[key])
    return normalized(statement)


def check_secrets_key(template):
    """SecretsKey: a KMS key of its own (not the tables' DataKey), rotated,
    kept on stack deletion, whose key policy keeps the account's
    administration statement and otherwise lets only the roles of
    SecretReaderRoleArns decrypt, only api_key values, and only when the
    parameter names any."""
    raw = template.get("Resources", {})
    key = raw.get(SECRETS_KEY, {})
    if key.get("Type") != "AWS::KMS::Key":
        return [f"no {SECRETS_KEY} (AWS::KMS::Key) seals api_key"]
    problems = []
    if "Condition" in key:
        problems.append(f"{SECRETS_KEY} must always exist, has Condition {key['Condition']}")
    if key.get("DeletionPolicy") != "Retain" or key.get("UpdateReplacePolicy") != "Retain":
        problems.append(f"{SECRETS_KEY} must be retained (deleting it makes every sealed api_key unreadable)")
    properties = key.get("Properties", {})
    if properties.get("EnableKeyRotation") is not True:
        problems.append(f"{SECRETS_KEY} must rotate (EnableKeyRotation true), has "
                        f"{json.dumps(properties.get('EnableKeyRotation'))}")
    for _, table, _ in ROUTES.values():
        sse = raw.get(table, {}).get("Properties", {}).get("SSESpecification", {})
        if sse.get("KMSMasterKeyId") != {"Ref": TABLES_KEY}:
            problems.append(f"{table} must be encrypted with the tables' {TABLES_KEY}, never with {SECRETS_KEY}; "
                            f"uses {json.dumps(sse.get('KMSMasterKeyId'))}")
    parameter = template.get("Parameters", {}).get("SecretReaderRoleArns", {})
    if parameter.get("Type") != "CommaDelimitedList" or parameter.get("Default") != "":
        problems.append(f"SecretReaderRoleArns must be a CommaDelimitedList defaulting to empty, is {json.dumps(parameter)}")
    pattern = parameter.get("AllowedPattern", ".*")
    for value, allowed in (("", True), ("arn:aws:iam::123456789012:role/reader", True),
                           ("arn:aws:iam::123456789012:role/*", False), ("*", False),
                           ("arn:aws:iam::123456789012:user/someone", False)):
        if bool(re.fullmatch(pattern, value)) != allowed:
            problems.append(f"SecretReaderRoleArns's AllowedPattern {pattern!r} {'refuses' if allowed else 'accepts'} "
                            f"{value!r} (exact role ARNs only, no wildcard)")
    for readers in ([""], ["arn:aws:iam::123456789012:role/reader"]):
        try:
            _, conditions = conditions_for(template, {"SecretReaderRoleArns": readers})
        except (KeyError, ValueError) as error:
            return problems + [f"the conditions cannot be evaluated for SecretReaderRoleArns={readers}: {error}"]
        policy = resolve(json.loads(json.dumps(properties.get("KeyPolicy", {}))), conditions)
        statements = [canonical_statement(s) for s in as_list(policy.get("Statement", []))]
        administration = canonical_statement(KEY_ADMINISTRATION)
        if administration not in statements:
            problems.append(f"{SECRETS_KEY}'s key policy must keep the account's administration statement "
                            f"{json.dumps(KEY_ADMINISTRATION)}")
        others = [s for s in statements if s != administration]
        expected = [canonical_statement(SECRET_READERS)] if readers != [""] else []
        if others != expected:
            problems.append(f"with SecretReaderRoleArns={readers}, {SECRETS_KEY}'s key policy must grant "
                            f"{json.dumps(expected)} beside the administration, grants {json.dumps(others)}")
    return problems


# What the access log must say about each request, by $context variable.
ACCESS_LOG_FIELDS = [
    "$context.requestId",
    "$context.awsEndpointRequestId",  # the Lambda request id the functions log
    "$context.routeKey",
    "$context.status",
    "$context.responseLatency",
    "$context.integrationErrorMessage",
    "$context.authorizer.claims.sub",
    "$context.identity.userArn",
]
# ...and what it must never carry: query strings, bodies, raw paths, headers.
ACCESS_LOG_FORBIDDEN = ["query", "body", "$context.path", "$request", "$input", "header"]

# (namespace, metric, dimension) every resource must be alarmed on.
ALARMED = (
    [("AWS/ApiGateway", "5xx", ("ApiId", "HttpApi"))]
    + [("AWS/Lambda", metric, ("FunctionName", function))
       for function, _, _ in ROUTES.values() for metric in ("Errors", "Throttles", "Duration")]
    + [("AWS/DynamoDB", metric, ("TableName", table))
       for _, table, _ in ROUTES.values() for metric in ("ThrottledRequests", "SystemErrors")]
)


def alarm_metrics(alarm):
    """(namespace, metric, statistic, dimensions) of each metric an alarm watches."""
    if "MetricName" in alarm:
        yield alarm.get("Namespace"), alarm["MetricName"], alarm.get("Statistic"), alarm.get("Dimensions", [])
    for query in alarm.get("Metrics", []):
        stat = query.get("MetricStat")
        if stat:
            metric = stat["Metric"]
            yield metric.get("Namespace"), metric.get("MetricName"), stat.get("Stat"), metric.get("Dimensions", [])


def check_operations(template, resources):
    """The stage's JSON access log, and alarms on every function, table
    and the API that notify the topic an operator may subscribe to."""
    problems = []
    stages = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Stage"]
    for stage in stages:
        settings = stage.get("AccessLogSettings", {})
        if settings.get("DestinationArn") != {"Fn::GetAtt": ["ApiAccessLogs", "Arn"]}:
            problems.append(f"stage {stage.get('StageName')} does not write its access log to ApiAccessLogs")
            continue
        log_format = settings.get("Format", "")
        try:
            json.loads(log_format.replace("$context.error.messageString", '""'))
        except ValueError:
            problems.append(f"the access-log format is not one JSON object: {log_format}")
        missing = [field for field in ACCESS_LOG_FIELDS if f'"{field}"' not in log_format]
        if missing:
            problems.append(f"the access log lacks {missing}")
        leaked = [word for word in ACCESS_LOG_FORBIDDEN if word.lower() in log_format.lower()]
        if leaked:
            problems.append(f"the access log may carry request data: {leaked}")
    if not stages:
        problems.append("no API stage")
    if "RetentionInDays" not in resources.get("ApiAccessLogs", {}).get("Properties", {}):
        problems.append("ApiAccessLogs keeps logs forever (no RetentionInDays)")

    alarms = {name: r["Properties"] for name, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    watched = set()
    for name, alarm in alarms.items():
        if alarm.get("AlarmActions") != [{"Ref": "AlarmTopic"}]:
            problems.append(f"{name} does not notify AlarmTopic")
        if not alarm.get("AlarmDescription"):
            problems.append(f"{name} does not say what it means")
        for namespace, metric, statistic, dimensions in alarm_metrics(alarm):
            for dimension in dimensions:
                value = dimension.get("Value")
                if isinstance(value, dict) and list(value) == ["Ref"]:
                    watched.add((namespace, metric, (dimension["Name"], value["Ref"])))
            if metric == "Duration":
                timeout = resources[ROUTES["/api/agent-server/models/{id}"][0]]["Properties"]["Timeout"]
                if statistic != "Maximum" or alarm.get("Threshold") != timeout * 1000 * 0.8:
                    problems.append(f"{name} must fire on a Maximum Duration over 80% of the {timeout} s timeout")
    for namespace, metric, dimension in ALARMED:
        if (namespace, metric, dimension) not in watched:
            problems.append(f"no alarm watches {namespace} {metric} of {dimension[1]}")
    timeouts = {resources[function]["Properties"].get("Timeout") for function, _, _ in ROUTES.values()}
    if len(timeouts) != 1:
        problems.append(f"the functions' timeouts differ ({timeouts}); the duration alarm assumes one")
    if resources.get("AlarmTopic", {}).get("Type") != "AWS::SNS::Topic":
        problems.append("no AlarmTopic")
    subscription = resources.get("AlarmEmailSubscription", {})
    if (subscription.get("Condition") != "HasAlarmEmail"
            or subscription.get("Properties", {}).get("Endpoint") != {"Ref": "AlarmEmail"}
            or template.get("Parameters", {}).get("AlarmEmail", {}).get("Default") != ""):
        problems.append("AlarmEmail must be optional and, when set, subscribe to AlarmTopic")
    return problems


def api_alarm(alarms, metric, predicate):
    """The alarms watching AWS/ApiGateway `metric` of the HttpApi that
    satisfy predicate(alarm, statistic)."""
    found = []
    for name, alarm in alarms.items():
        for namespace, watched, statistic, dimensions in alarm_metrics(alarm):
            if ((namespace, watched) == ("AWS/ApiGateway", metric)
                    and {"Name": "ApiId", "Value": {"Ref": "HttpApi"}} in dimensions
                    and predicate(alarm, statistic or alarm.get("ExtendedStatistic"))):
                found.append(name)
    return found


def check_guards(template, resources):
    """Deletion protection on the tables; each function's reserved
    concurrency from ReservedConcurrency, left out when it is empty (0 would
    stop the function); an alarm on the API's p99 latency above
    LatencyAlarmThresholdMs and one on its 4xx rate (4xx / Count, API
    Gateway's 429s included), notifying AlarmTopic like every alarm."""
    problems = []
    raw = template.get("Resources", {})
    for _, table, _ in ROUTES.values():
        if raw.get(table, {}).get("Properties", {}).get("DeletionProtectionEnabled") is not True:
            problems.append(f"{table} must have DeletionProtectionEnabled true")
    parameter = template.get("Parameters", {}).get("ReservedConcurrency", {})
    pattern = parameter.get("AllowedPattern", ".*")
    if parameter.get("Type") != "String" or parameter.get("Default") != "":
        problems.append(f"ReservedConcurrency must be a String defaulting to empty, is {json.dumps(parameter)}")
    for value, allowed in (("", True), ("5", True), ("100", True), ("0", False), ("-1", False), ("05", False)):
        if bool(re.fullmatch(pattern, value)) != allowed:
            problems.append(f"ReservedConcurrency's AllowedPattern {pattern!r} {'refuses' if allowed else 'accepts'} "
                            f"{value!r} (empty or a positive number; 0 stops the function)")
    for value, expected in (("", None), ("5", {"Ref": "ReservedConcurrency"})):
        try:
            _, conditions = conditions_for(template, {"ReservedConcurrency": value})
        except (KeyError, ValueError) as error:
            return problems + [f"the conditions cannot be evaluated for ReservedConcurrency={value!r}: {error}"]
        for function, _, _ in ROUTES.values():
            properties = resolve(resources.get(function, {}).get("Properties", {}), conditions)
            reserved = properties.get("ReservedConcurrentExecutions")
            if reserved != expected:
                problems.append(f"with ReservedConcurrency={value!r}, {function}'s ReservedConcurrentExecutions "
                                f"must be {json.dumps(expected)} (left out when empty), is {json.dumps(reserved)}")
    alarms = {name: r["Properties"] for name, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    threshold = template.get("Parameters", {}).get("LatencyAlarmThresholdMs", {})
    if threshold.get("Type") != "Number" or threshold.get("Default") != 1000:
        problems.append(f"LatencyAlarmThresholdMs must be a Number defaulting to 1000, is {json.dumps(threshold)}")
    if not api_alarm(alarms, "Latency", lambda alarm, statistic: (
            statistic == "p99" and "MetricName" in alarm
            and alarm.get("Threshold") == {"Ref": "LatencyAlarmThresholdMs"}
            and alarm.get("ComparisonOperator") == "GreaterThanThreshold")):
        problems.append("no alarm fires when the API's p99 Latency (AWS/ApiGateway, ApiId) exceeds "
                        "LatencyAlarmThresholdMs")

    def is_rate(alarm, _):
        ids = {q.get("MetricStat", {}).get("Metric", {}).get("MetricName"): q.get("Id")
               for q in alarm.get("Metrics", []) if "MetricStat" in q}
        stats = {q.get("MetricStat", {}).get("Metric", {}).get("MetricName"): q.get("MetricStat", {}).get("Stat")
                 for q in alarm.get("Metrics", []) if "MetricStat" in q}
        returned = [q for q in alarm.get("Metrics", []) if q.get("ReturnData", True)]
        if set(ids) != {"4xx", "Count"} or stats != {"4xx": "Sum", "Count": "Sum"} or len(returned) != 1:
            return False
        expression = returned[0].get("Expression", "")
        errors, requests = re.escape(ids["4xx"]), re.escape(ids["Count"])
        return (re.search(rf"{errors}\b.*\)?\s*/\s*{requests}\b", expression) is not None
                and isinstance(alarm.get("Threshold"), (int, float)) and 0 < alarm["Threshold"] < 100
                and alarm.get("ComparisonOperator") == "GreaterThanThreshold")
    if not api_alarm(alarms, "4xx", is_rate):
        problems.append("no alarm fires on the API's 4xx rate (metric math: 4xx / Count, summed, of the HttpApi; "
                        "a percentage threshold)")
    return problems


def check_tracing(template, resources):
    """EnableTracing (default true) turns the functions' active tracing on
    (Tracing: Active) or off; the X-Ray write permissions that go with it
    are check_function's."""
    problems = []
    parameter = template.get("Parameters", {}).get("EnableTracing", {})
    if sorted(parameter.get("AllowedValues", [])) != ["false", "true"] or parameter.get("Default") != "true":
        problems.append(f"EnableTracing must allow true and false and default to true, is {json.dumps(parameter)}")
    for tracing, modes in (("true", ("Active",)), ("false", ("PassThrough", None))):
        try:
            _, conditions = conditions_for(template, {"EnableTracing": tracing})
        except (KeyError, ValueError) as error:
            return problems + [f"the conditions cannot be evaluated for EnableTracing={tracing}: {error}"]
        if conditions.get(TRACING_CONDITION) != (tracing == "true"):
            problems.append(f"condition {TRACING_CONDITION} is {conditions.get(TRACING_CONDITION)} with "
                            f"EnableTracing={tracing}")
        for function, _, _ in ROUTES.values():
            properties = resolve(resources.get(function, {}).get("Properties", {}), conditions)
            mode = properties.get("TracingConfig", {}).get("Mode")
            if mode not in modes:
                problems.append(f"with EnableTracing={tracing}, {function}'s tracing mode must be "
                                f"{' or '.join(str(m) for m in modes)}, is {mode}")
    return problems


# The dashboard: its body, with ${...} references left as text, must show
# these (namespace, metric, dimensions, statistic); None: any statistic.
DASHBOARD = "Dashboard"
METRICS_NS = "${MetricsNamespace}"
ROUTE_NAMES = {"UpdateApiKeyFunction": "update-api-key", "UpdateMcpServerFunction": "update-mcp-server",
               "UpdateModelFunction": "update-model"}
OUTCOMES = ("updated", "invalid", "forbidden", "not_found", "conflict", "unavailable", "error")
API = (("ApiId", "${HttpApi}"),)


def dashboard_metrics():
    """What the dashboard must show whatever the parameters."""
    wanted = []
    for function, table, _ in ROUTES.values():
        route = (("Route", ROUTE_NAMES[function]),)
        wanted += [(METRICS_NS, "Requests", route, None)]
        wanted += [(METRICS_NS, "Requests", route + (("Outcome", outcome),), None) for outcome in OUTCOMES]
        wanted += [(METRICS_NS, "Latency", route, stat) for stat in ("p50", "p99")]
        wanted += [(METRICS_NS, "DynamoDbLatency", route, None), (METRICS_NS, "ColdStart", route, "Sum")]
        wanted += [("AWS/Lambda", "Throttles", (("FunctionName", f"${{{function}}}"),), "Sum")]
        wanted += [("AWS/DynamoDB", "ConsumedWriteCapacityUnits", (("TableName", f"${{{table}}}"),), "Sum")]
        wanted += [("AWS/DynamoDB", "ThrottledRequests", (("TableName", f"${{{table}}}"), ("Operation", "UpdateItem")),
                    "Sum")]
    wanted += [(METRICS_NS, "KmsLatency", (("Route", "update-api-key"),), None)]
    wanted += [("AWS/ApiGateway", metric, API, stat) for metric in ("Latency", "IntegrationLatency")
               for stat in ("p50", "p99")]
    wanted += [("AWS/ApiGateway", metric, API, "Sum") for metric in ("Count", "4xx", "5xx")]
    return wanted


DLQ_DEPTH = ("AWS/SQS", "ApproximateNumberOfMessagesVisible", (("QueueName", "${ChangeEventsDeadLetterQueue.QueueName}"),),
             "Maximum")


def dashboard_body(value, conditions):
    """The dashboard body's text for these conditions: Fn::If resolved,
    Fn::Join joined, Fn::Sub strings as they are (references left)."""
    value = resolve(value, conditions)
    if isinstance(value, str):
        return value
    if sub_text(value) is not None:
        return sub_text(value)
    if isinstance(value, dict) and list(value) == ["Fn::Join"]:
        separator, parts = value["Fn::Join"]
        return separator.join(dashboard_body(part, conditions) for part in parts)
    raise ValueError(f"cannot read {json.dumps(value)[:80]}")


def widget_metrics(properties):
    """(namespace, metric, dimensions, statistic) of a metric widget's lines."""
    for line in properties.get("metrics", []):
        options = line[-1] if line and isinstance(line[-1], dict) else {}
        names = [v for v in line if not isinstance(v, dict)]
        if len(names) < 2 or len(names) % 2 or not all(isinstance(v, str) for v in names) or "." in names[:2]:
            yield None  # an expression or the "." shorthand: not read here
            continue
        dimensions = tuple(sorted(zip(names[2::2], names[3::2])))
        yield names[0], names[1], dimensions, options.get("stat", properties.get("stat"))


def check_dashboard(template):
    """One dashboard, whatever the parameters, showing dashboard_metrics()
    (the functions' from MetricsNamespace, never a fixed namespace), the
    init duration from the functions' REPORT records, every alarm's state,
    and the change events' dead-letter queue exactly when they exist; every
    widget titled, in its region, on the 24-column grid."""
    raw = template.get("Resources", {})
    dashboard = raw.get(DASHBOARD, {})
    if dashboard.get("Type") != "AWS::CloudWatch::Dashboard":
        return [f"no {DASHBOARD} (AWS::CloudWatch::Dashboard)"]
    problems = []
    if "Condition" in dashboard:
        problems.append(f"{DASHBOARD} must always exist, has Condition {dashboard['Condition']}")
    for publish in ("true", "false"):
        try:
            _, conditions = conditions_for(template, {"PublishChangeEvents": publish})
            body = json.loads(dashboard_body(dashboard.get("Properties", {}).get("DashboardBody"), conditions))
        except (KeyError, ValueError, TypeError) as error:
            problems.append(f"with PublishChangeEvents={publish}, {DASHBOARD}'s body is not JSON: {error}")
            continue
        shown, alarms, queries = set(), set(), []
        widgets = body.get("widgets", []) if isinstance(body, dict) else []
        if not 1 <= len(widgets) <= 20:
            problems.append(f"{DASHBOARD} has {len(widgets)} widgets; readable at a glance is 20 at most")
        for widget in widgets:
            properties = widget.get("properties", {})
            if not properties.get("title"):
                problems.append(f"a {widget.get('type')} widget of {DASHBOARD} has no title")
            if not (isinstance(widget.get("x"), int) and isinstance(widget.get("width"), int)
                    and widget["x"] + widget["width"] <= 24):
                problems.append(f"{DASHBOARD}'s widget {properties.get('title')!r} is off the 24-column grid")
            if widget.get("type") in ("metric", "log") and properties.get("region") != "${AWS::Region}":
                problems.append(f"{DASHBOARD}'s widget {properties.get('title')!r} is not in the stack's region")
            if widget.get("type") == "metric":
                for line in widget_metrics(properties):
                    if line is None:
                        problems.append(f"{DASHBOARD}'s widget {properties.get('title')!r} has a line the check "
                                        "cannot read (write each metric out)")
                        continue
                    if not line[0].startswith("AWS/") and line[0] != METRICS_NS:
                        problems.append(f"{DASHBOARD} reads {line[1]} from {line[0]}, not from MetricsNamespace")
                    shown.add(line)
            elif widget.get("type") == "alarm":
                alarms.update(properties.get("alarms", []))
            elif widget.get("type") == "log":
                queries.append(properties.get("query", ""))
        for namespace, metric, dimensions, stat in dashboard_metrics():
            if not any(s[:3] == (namespace, metric, tuple(sorted(dimensions))) and (stat is None or s[3] == stat)
                       for s in shown):
                problems.append(f"{DASHBOARD} does not show {namespace} {metric} {dict(dimensions)}"
                                f"{' ' + stat if stat else ''}")
        dlq = any(s[:3] == DLQ_DEPTH[:3] for s in shown)
        if dlq != (publish == "true"):
            problems.append(f"with PublishChangeEvents={publish}, {DASHBOARD} must {'' if publish == 'true' else 'not '}"
                            f"show the change events' dead-letter queue depth")
        existing = {f"${{{name}.Arn}}" for name, r in raw.items() if r.get("Type") == "AWS::CloudWatch::Alarm"
                    and (("Condition" not in r) or conditions.get(r["Condition"]))}
        if alarms != existing:
            problems.append(f"with PublishChangeEvents={publish}, {DASHBOARD}'s alarm widget must show every alarm; "
                            f"lacks {sorted(existing - alarms)}, shows others {sorted(alarms - existing)}")
        groups = [f"SOURCE '${{{group}}}'" for _, _, group in ROUTES.values()]
        if not any(all(g in q for g in groups) and "platform.report" in q and "initDurationMs" in q for q in queries):
            problems.append(f"{DASHBOARD} does not show the init duration (a log widget over the three functions' "
                            "groups reading the platform.report records' initDurationMs)")
    return list(dict.fromkeys(problems))


# Change events: per table, its pipe, the pipe's role, the event's detail
# type and the fields of the event's detail.
CHANGE_PIPES = {
    "ApiKeysTable": ("ApiKeysChangePipe", "ApiKeysChangePipeRole", "API key updated",
                     ("id", "version", "updated_at", "updated_by", "updated_fields")),
    "McpServersTable": ("McpServersChangePipe", "McpServersChangePipeRole", "MCP server updated",
                        ("id", "project_id", "version", "updated_at", "updated_by", "updated_fields")),
    "ModelsTable": ("ModelsChangePipe", "ModelsChangePipeRole", "Model updated",
                    ("id", "project_id", "version", "updated_at", "updated_by", "updated_fields")),
}
# The allow-list: each field of an event's detail, and the one place of the
# stream record it may come from. Nothing else of the record (api_key,
# headers, parameters, name, endpoint...) may reach an event.
EVENT_FIELDS = {
    "id": "$.dynamodb.NewImage.id.S",
    "project_id": "$.dynamodb.NewImage.project_id.S",
    "version": "$.dynamodb.NewImage.version.N",
    "updated_at": "$.dynamodb.NewImage.updated_at.S",
    "updated_by": "$.dynamodb.NewImage.updated_by.S",
    "updated_fields": "$.dynamodb.NewImage.updated_fields.SS",
}
# Fields whose placeholder sits unquoted in brackets, [<path>]: a string set
# renders as a JSON array, and a set the item lacks as nothing, so the
# field is [[...]] or [] and the text stays JSON either way. Every other
# placeholder is quoted, "<path>" (an absent attribute renders as "").
LIST_FIELDS = {"updated_fields"}
EVENT_SOURCE = "agent-server"
CHANGE_CONDITION = "PublishesChangeEvents"
CHANGE_BUS = "ChangeEventBus"
CHANGE_DLQ = "ChangeEventsDeadLetterQueue"
# Everything a pipe's role may do, by action: on which resource, under
# which condition. Each pipe needs all of it.
STREAM_READ = ("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator",
               "dynamodb:ListStreams")
VIA_DYNAMODB = {"StringEquals": {"kms:ViaService": {"Fn::Sub": "dynamodb.${AWS::Region}.${AWS::URLSuffix}"}}}


def pipe_grants(table):
    grants = {action: ({"Fn::GetAtt": [table, "StreamArn"]}, None) for action in STREAM_READ}
    grants["kms:Decrypt"] = ({"Fn::GetAtt": ["DataKey", "Arn"]}, VIA_DYNAMODB)
    grants["events:PutEvents"] = ({"Fn::GetAtt": [CHANGE_BUS, "Arn"]}, None)
    grants["sqs:SendMessage"] = ({"Fn::GetAtt": [CHANGE_DLQ, "Arn"]}, None)
    return grants


def check_input_template(name, text, fields):
    """The template is a JSON object of exactly `fields`, each the quoted
    placeholder of its allow-listed attribute (in brackets for LIST_FIELDS):
    no other placeholder (no other attribute, no whole image, no
    aws.pipes.event), no constant."""
    if not isinstance(text, str):
        return [f"{name}'s InputTemplate is not a plain string: {json.dumps(text)}"]
    problems = []
    allowed = {EVENT_FIELDS[field] for field in fields}
    for placeholder in re.findall(r"<([^<>]*)>", text):
        if placeholder not in allowed:
            problems.append(f"{name}'s InputTemplate references <{placeholder}>, outside the allow-list "
                            f"{sorted(allowed)}")
    # Placeholders become strings the JSON parser can read: a quoted one
    # stays a string value, a bracketed list field's a list of one string,
    # any other unquoted one makes the text invalid.
    marked = text
    for field in LIST_FIELDS & set(fields):
        marked = marked.replace(f"[<{EVENT_FIELDS[field]}>]", f'["\u27e8{EVENT_FIELDS[field]}\u27e9"]')
    marked = re.sub(r"<([^<>]*)>", lambda m: "\u27e8" + m.group(1) + "\u27e9", marked)

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise ValueError(f"duplicate keys {keys}")
        return dict(pairs)
    try:
        detail = json.loads(marked, object_pairs_hook=no_duplicates)
    except ValueError as error:
        return problems + [f"{name}'s InputTemplate is not a JSON object of quoted placeholders ({error}): {text}"]
    if not isinstance(detail, dict) or sorted(detail) != sorted(fields):
        return problems + [f"{name}'s InputTemplate must build exactly {list(fields)}, builds {text}"]
    for field in fields:
        placeholder = "\u27e8" + EVENT_FIELDS[field] + "\u27e9"
        if field in LIST_FIELDS and detail[field] != [placeholder]:
            problems.append(f"{name}'s InputTemplate must set {field} to [<{EVENT_FIELDS[field]}>], "
                            f"sets {json.dumps(detail[field], ensure_ascii=False)}")
        elif field not in LIST_FIELDS and detail[field] != placeholder:
            problems.append(f"{name}'s InputTemplate must set {field} to \"<{EVENT_FIELDS[field]}>\", "
                            f"sets {json.dumps(detail[field], ensure_ascii=False)}")
    return problems


def check_pipe_role(resources, pipe, role_name, table):
    """The pipe's own role: assumed by EventBridge Pipes for this account
    only, and allowed nothing but pipe_grants(table), all of which it needs."""
    role = resources.get(role_name, {})
    if role.get("Type") != "AWS::IAM::Role":
        return [f"{pipe}'s role {role_name} is not an AWS::IAM::Role of the template"]
    users = [name for name, r in resources.items()
             if r.get("Type") == "AWS::Pipes::Pipe"
             and r.get("Properties", {}).get("RoleArn") == {"Fn::GetAtt": [role_name, "Arn"]}]
    problems = [] if users == [pipe] else [f"{role_name} is used by {users}, not only by {pipe}"]
    properties = role.get("Properties", {})
    if role.get("Condition") != CHANGE_CONDITION:
        problems.append(f"{role_name} must exist only with {CHANGE_CONDITION}")
    for extra in ("ManagedPolicyArns", "PermissionsBoundary"):
        if properties.get(extra):
            problems.append(f"{role_name} has {extra}: {json.dumps(properties[extra])}")
    trust = as_list(properties.get("AssumeRolePolicyDocument", {}).get("Statement", []))
    expected_trust = {
        "Effect": "Allow", "Principal": {"Service": "pipes.amazonaws.com"}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}},
    }
    if json.loads(json.dumps(trust)) != [expected_trust]:
        problems.append(f"{role_name} may be assumed by {json.dumps(trust)}, not only by EventBridge Pipes "
                        "for this account")
    grants = pipe_grants(table)
    granted = set()
    for policy in properties.get("Policies", []):
        for statement in as_list(policy.get("PolicyDocument", {}).get("Statement", [])):
            statement = json.loads(json.dumps(statement))
            if statement.get("Effect") != "Allow":
                continue
            if set(statement) - {"Effect", "Action", "Resource", "Sid", "Condition"}:
                problems.append(f"{role_name} has a statement with {sorted(statement)}: {json.dumps(statement)}")
                continue
            resources_of = as_list(statement.get("Resource", []))
            for action in as_list(statement.get("Action", [])):
                if action not in grants:
                    problems.append(f"{role_name} may call {action}, which {pipe} does not need")
                    continue
                resource, condition = grants[action]
                if resources_of != [resource]:
                    problems.append(f"{role_name} may call {action} on {json.dumps(resources_of)}, "
                                    f"not only on {json.dumps(resource)}")
                elif statement.get("Condition") != condition:
                    problems.append(f"{role_name} may call {action} under {json.dumps(statement.get('Condition'))}, "
                                    f"not only under {json.dumps(condition)}")
                else:
                    granted.add(action)
    missing = sorted(set(grants) - granted)
    if missing:
        problems.append(f"{role_name} lacks {missing}, which {pipe} needs")
    return problems


def check_pipe(resources, table, pipe, role_name, detail_type, fields):
    resource = resources.get(pipe, {})
    if resource.get("Type") != "AWS::Pipes::Pipe":
        return [f"no change-event pipe {pipe} on {table}"]
    problems = []
    if resource.get("Condition") != CHANGE_CONDITION:
        problems.append(f"{pipe} must exist only with {CHANGE_CONDITION}")
    properties = json.loads(json.dumps(resource.get("Properties", {})))
    if properties.get("Source") != {"Fn::GetAtt": [table, "StreamArn"]}:
        problems.append(f"{pipe} must read {table}'s stream, reads {json.dumps(properties.get('Source'))}")
    if properties.get("Target") != {"Fn::GetAtt": [CHANGE_BUS, "Arn"]}:
        problems.append(f"{pipe} must target {CHANGE_BUS}, targets {json.dumps(properties.get('Target'))}")
    if properties.get("RoleArn") != {"Fn::GetAtt": [role_name, "Arn"]}:
        problems.append(f"{pipe} must run as {role_name}, runs as {json.dumps(properties.get('RoleArn'))}")
    if "Enrichment" in properties or "EnrichmentParameters" in properties:
        problems.append(f"{pipe} has an enrichment, which would receive the whole record, secrets included")
    source = properties.get("SourceParameters", {})
    filters = source.get("FilterCriteria", {}).get("Filters", [])
    try:
        patterns = [json.loads(f.get("Pattern", "")) for f in filters]
    except ValueError:
        patterns = None
    if patterns != [{"eventName": ["MODIFY"]}]:
        problems.append(f"{pipe} must pass MODIFY records only (one filter {{\"eventName\": [\"MODIFY\"]}}), "
                        f"filters {json.dumps(filters)}")
    stream = source.get("DynamoDBStreamParameters", {})
    if stream.get("StartingPosition") != "LATEST":
        problems.append(f"{pipe} must start at LATEST, starts at {stream.get('StartingPosition')}")
    if stream.get("DeadLetterConfig", {}).get("Arn") != {"Fn::GetAtt": [CHANGE_DLQ, "Arn"]}:
        problems.append(f"{pipe} must send what it cannot deliver to {CHANGE_DLQ}")
    retries = stream.get("MaximumRetryAttempts")
    if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 10000:
        problems.append(f"{pipe} must bound its retries (MaximumRetryAttempts 0 to 10000; absent or -1 is "
                        f"forever), has {retries}")
    target = properties.get("TargetParameters", {})
    if set(target) != {"InputTemplate", "EventBridgeEventBusParameters"}:
        problems.append(f"{pipe}'s target parameters must be the InputTemplate and the bus parameters, are {sorted(target)}")
    bus = target.get("EventBridgeEventBusParameters")
    if bus != {"Source": EVENT_SOURCE, "DetailType": detail_type}:
        problems.append(f"{pipe} must publish source {EVENT_SOURCE} and detail type {detail_type!r} "
                        f"(and nothing else), publishes {json.dumps(bus)}")
    problems += check_input_template(pipe, target.get("InputTemplate"), fields)
    logging = properties.get("LogConfiguration")
    if logging is not None and logging.get("IncludeExecutionData") not in (None, []):
        problems.append(f"{pipe} logs execution data (the records, secrets included): "
                        f"IncludeExecutionData {json.dumps(logging.get('IncludeExecutionData'))}")
    return problems + check_pipe_role(resources, pipe, role_name, table)


def check_change_events(template):
    """Streams, pipes, roles, the bus, the dead-letter queue and its alarm:
    see the module's docstring."""
    problems = []
    parameter = template.get("Parameters", {}).get("PublishChangeEvents", {})
    if sorted(parameter.get("AllowedValues", [])) != ["false", "true"] or parameter.get("Default") != "true":
        problems.append(f"PublishChangeEvents must allow true and false and default to true, is {json.dumps(parameter)}")
    raw = template.get("Resources", {})
    for publish in ("true", "false"):
        try:
            _, conditions = conditions_for(template, {"PublishChangeEvents": publish})
        except (KeyError, ValueError) as error:
            return problems + [f"the conditions cannot be evaluated for PublishChangeEvents={publish}: {error}"]
        if conditions.get(CHANGE_CONDITION) != (publish == "true"):
            problems.append(f"condition {CHANGE_CONDITION} is {conditions.get(CHANGE_CONDITION)} with "
                            f"PublishChangeEvents={publish}")
            continue
        for table in CHANGE_PIPES:
            properties = resolve_if(raw.get(table, {}).get("Properties", {}), conditions)
            spec = json.loads(json.dumps(properties.get("StreamSpecification")))
            if spec == {"Ref": "AWS::NoValue"}:
                spec = None
            expected = {"StreamViewType": "NEW_IMAGE"} if publish == "true" else None
            if spec != expected:
                problems.append(f"with PublishChangeEvents={publish}, {table}'s stream must be "
                                f"{json.dumps(expected)}, is {json.dumps(spec)}")
    pipes = sorted(name for name, r in raw.items() if r.get("Type") == "AWS::Pipes::Pipe")
    expected_pipes = sorted(pipe for pipe, _, _, _ in CHANGE_PIPES.values())
    if pipes != expected_pipes:
        problems.append(f"the pipes are {pipes}, expected one per table: {expected_pipes}")
    for table, (pipe, role, detail_type, fields) in CHANGE_PIPES.items():
        problems += check_pipe(raw, table, pipe, role, detail_type, fields)
    bus = raw.get(CHANGE_BUS, {})
    if bus.get("Type") != "AWS::Events::EventBus" or bus.get("Condition") != CHANGE_CONDITION:
        problems.append(f"{CHANGE_BUS} must be an AWS::Events::EventBus that exists with {CHANGE_CONDITION}")
    queue = raw.get(CHANGE_DLQ, {})
    queue_properties = queue.get("Properties", {})
    if queue.get("Type") != "AWS::SQS::Queue" or queue.get("Condition") != CHANGE_CONDITION:
        problems.append(f"{CHANGE_DLQ} must be an AWS::SQS::Queue that exists with {CHANGE_CONDITION}")
    if queue_properties.get("SqsManagedSseEnabled") is not True and "KmsMasterKeyId" not in queue_properties:
        problems.append(f"{CHANGE_DLQ} must be encrypted (SqsManagedSseEnabled, or a KMS key)")
    watched = False
    for alarm in raw.values():
        if alarm.get("Type") != "AWS::CloudWatch::Alarm":
            continue
        for namespace, metric, _, dimensions in alarm_metrics(alarm.get("Properties", {})):
            if ((namespace, metric) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
                    and {"Name": "QueueName", "Value": {"Fn::GetAtt": [CHANGE_DLQ, "QueueName"]}}
                    in json.loads(json.dumps(dimensions))
                    and alarm["Properties"].get("ComparisonOperator") == "GreaterThanThreshold"
                    and alarm["Properties"].get("Threshold") == 0
                    and alarm.get("Condition") == CHANGE_CONDITION):
                watched = True
    if not watched:
        problems.append(f"no alarm fires when {CHANGE_DLQ} holds a message (ApproximateNumberOfMessagesVisible > 0)")
    failing = set()
    for alarm in raw.values():
        properties = alarm.get("Properties", {})
        if (alarm.get("Type") != "AWS::CloudWatch::Alarm" or alarm.get("Condition") != CHANGE_CONDITION
                or properties.get("ComparisonOperator") != "GreaterThanThreshold" or properties.get("Threshold") != 0):
            continue
        for namespace, metric, statistic, dimensions in alarm_metrics(properties):
            if (namespace, metric, statistic) == ("AWS/EventBridge/Pipes", "ExecutionFailed", "Sum"):
                failing.update(json.dumps(d.get("Value"), sort_keys=True) for d in dimensions
                               if d.get("Name") == "PipeName")
    for pipe, _, _, _ in CHANGE_PIPES.values():
        if json.dumps({"Ref": pipe}) not in failing:
            problems.append(f"no alarm fires when {pipe} fails an execution (AWS/EventBridge/Pipes ExecutionFailed, "
                            f"Sum > 0, with {CHANGE_CONDITION})")
    outputs = template.get("Outputs", {})
    for output in ("ChangeEventBusName", "ChangeEventBusArn", "ChangeEventRuleExample"):
        if output not in outputs:
            problems.append(f"no output {output}")
    try:
        example = json.loads(outputs.get("ChangeEventRuleExample", {}).get("Value", ""))
        if (example.get("source") != [EVENT_SOURCE] or example.get("detail-type") != ["Model updated"]
                or len(example.get("detail", {}).get("project_id", [])) != 1):
            problems.append(f"ChangeEventRuleExample must match one project's model updates, is {json.dumps(example)}")
    except (ValueError, AttributeError):
        problems.append("ChangeEventRuleExample must be an event pattern in JSON")
    return problems


# The audit trail (PublishChangeEvents only): a rule on the change bus that
# logs every change event (no replay) whole to the audit log group, named by
# the group's own ARN (the Arn attribute ends in :*, a target that deploys
# and never delivers), which EventBridge and the log-delivery service may
# write to under the group's resource policy (AWS's documented example, no
# condition), an
# alarm on the rule's failed deliveries, and an archive of the same events;
# both keep them AuditRetentionDays (0: for ever).
AUDIT_LOGS = "ChangeAuditLogs"
AUDIT_POLICY = "ChangeAuditLogsPolicy"
AUDIT_RULE = "ChangeAuditRule"
AUDIT_ARCHIVE = "ChangeEventArchive"
AUDIT_PATTERN = {"source": [EVENT_SOURCE], "replay-name": [{"exists": False}]}
# What CloudWatch Logs accepts as RetentionInDays.
LOG_RETENTION_DAYS = [1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                      2922, 3288, 3653]
AUDIT_OUTPUTS = {"ChangeAuditLogGroupName": {"Ref": AUDIT_LOGS}, "ChangeEventArchiveName": {"Ref": AUDIT_ARCHIVE}}
AUDIT_TARGET = {"Fn::Sub": f"arn:${{AWS::Partition}}:logs:${{AWS::Region}}:${{AWS::AccountId}}:log-group:${{{AUDIT_LOGS}}}"}
AUDIT_WRITERS = ["delivery.logs.amazonaws.com", "events.amazonaws.com"]
# The rule's FailedInvocations, as CloudWatch names a custom bus's rule.
AUDIT_DIMENSIONS = [{"Name": "EventBusName", "Value": {"Ref": CHANGE_BUS}},
                    {"Name": "RuleName", "Value": {"Fn::Select": [2, {"Fn::Split": ["/", {"Fn::GetAtt": [AUDIT_RULE, "Arn"]}]}]}}]


def sub_text(value):
    """The text of an Fn::Sub string with each ${Name} or ${Name.Attr}
    left as it is, or None if the value is not one."""
    if isinstance(value, dict) and list(value) == ["Fn::Sub"] and isinstance(value["Fn::Sub"], str):
        return value["Fn::Sub"]
    return None


def check_audit_policy(raw):
    policy = raw.get(AUDIT_POLICY, {})
    if policy.get("Type") != "AWS::Logs::ResourcePolicy" or policy.get("Condition") != CHANGE_CONDITION:
        return [f"{AUDIT_POLICY} must be an AWS::Logs::ResourcePolicy that exists with {CHANGE_CONDITION} "
                "(EventBridge writes to CloudWatch Logs under the group's resource policy)"]
    text = sub_text(policy.get("Properties", {}).get("PolicyDocument"))
    try:
        document = json.loads(text)
    except (TypeError, ValueError):
        return [f"{AUDIT_POLICY}'s PolicyDocument must be a JSON policy in an Fn::Sub string"]
    problems, granted = [], set()
    group = f"${{{AUDIT_LOGS}.Arn}}"
    # No condition, as in AWS's example: one the log-delivery service's
    # calls do not meet would leave the group empty.
    expected = {"logs:CreateLogStream": None, "logs:PutLogEvents": None}
    for statement in as_list(document.get("Statement", [])):
        if statement.get("Effect") != "Allow":
            continue
        principal = statement.get("Principal")
        services = principal.get("Service") if isinstance(principal, dict) and list(principal) == ["Service"] else None
        if not isinstance(services, (str, list)) or sorted(as_list(services)) != AUDIT_WRITERS:
            problems.append(f"{AUDIT_POLICY} lets {json.dumps(principal)} write, not exactly EventBridge and the "
                            f"log-delivery service {AUDIT_WRITERS} (AWS's documented example)")
        for action in as_list(statement.get("Action", [])):
            if action not in expected:
                problems.append(f"{AUDIT_POLICY} allows {action}, which EventBridge does not need")
            elif as_list(statement.get("Resource")) != [group]:
                problems.append(f"{AUDIT_POLICY} allows {action} on {json.dumps(statement.get('Resource'))}, "
                                f"not only on {group}")
            elif statement.get("Condition") != expected[action]:
                problems.append(f"{AUDIT_POLICY} allows {action} under {json.dumps(statement.get('Condition'))}, "
                                f"not only under {json.dumps(expected[action])}")
            else:
                granted.add(action)
    missing = sorted(set(expected) - granted)
    if missing:
        problems.append(f"{AUDIT_POLICY} does not let EventBridge {missing} in {AUDIT_LOGS}")
    return problems


def check_audit_trail(template):
    """See AUDIT_*: the audit log group, its resource policy, the rule that
    fills it, the archive, their retention and outputs."""
    problems = []
    raw = template.get("Resources", {})
    parameter = template.get("Parameters", {}).get("AuditRetentionDays", {})
    allowed = parameter.get("AllowedValues")
    if (parameter.get("Type") != "Number" or parameter.get("Default") != 0
            or not isinstance(allowed, list) or sorted(allowed) != [0] + LOG_RETENTION_DAYS):
        problems.append(f"AuditRetentionDays must be a Number defaulting to 0 (for ever) whose AllowedValues are 0 "
                        f"and the values CloudWatch Logs accepts {LOG_RETENTION_DAYS}, is {json.dumps(parameter)}")
    for name, kind in ((AUDIT_LOGS, "AWS::Logs::LogGroup"), (AUDIT_RULE, "AWS::Events::Rule"),
                       (AUDIT_ARCHIVE, "AWS::Events::Archive")):
        if raw.get(name, {}).get("Type") != kind or raw.get(name, {}).get("Condition") != CHANGE_CONDITION:
            problems.append(f"{name} must be an {kind} that exists with {CHANGE_CONDITION} (the audit trail)")
    logs = raw.get(AUDIT_LOGS, {})
    if logs.get("DeletionPolicy") != "Retain" or logs.get("UpdateReplacePolicy") != "Retain":
        problems.append(f"{AUDIT_LOGS} must be retained (DeletionPolicy and UpdateReplacePolicy Retain): the audit "
                        "log outlives the stack and PublishChangeEvents=false")
    if "LogGroupName" in logs.get("Properties", {}):
        problems.append(f"{AUDIT_LOGS} must be unnamed: a retained group of that name would stop PublishChangeEvents "
                        "from being turned back on")
    archive_resource = raw.get(AUDIT_ARCHIVE, {})
    if any(archive_resource.get(policy, "Delete") != "Delete" for policy in ("DeletionPolicy", "UpdateReplacePolicy")):
        problems.append(f"{AUDIT_ARCHIVE} must go with the bus (no Retain): its managed rule would keep "
                        f"{CHANGE_BUS} from being deleted")
    problems += check_audit_policy(raw)
    for days in ("0", "30"):
        try:
            _, conditions = conditions_for(template, {"AuditRetentionDays": days})
        except (KeyError, ValueError) as error:
            return problems + [f"the conditions cannot be evaluated for AuditRetentionDays={days}: {error}"]
        logs = resolve(raw.get(AUDIT_LOGS, {}).get("Properties", {}), conditions)
        retention = logs.get("RetentionInDays")
        expected = None if days == "0" else {"Ref": "AuditRetentionDays"}
        if retention != expected:
            problems.append(f"with AuditRetentionDays={days}, {AUDIT_LOGS}'s RetentionInDays must be "
                            f"{json.dumps(expected)} (CloudWatch Logs refuses 0; absent keeps for ever), "
                            f"is {json.dumps(retention)}")
    archive = raw.get(AUDIT_ARCHIVE, {}).get("Properties", {})
    if archive.get("SourceArn") != {"Fn::GetAtt": [CHANGE_BUS, "Arn"]}:
        problems.append(f"{AUDIT_ARCHIVE} must archive {CHANGE_BUS}, archives {json.dumps(archive.get('SourceArn'))}")
    if archive.get("RetentionDays") != {"Ref": "AuditRetentionDays"}:
        problems.append(f"{AUDIT_ARCHIVE} must keep events AuditRetentionDays, keeps {json.dumps(archive.get('RetentionDays'))}")
    if archive.get("EventPattern") != AUDIT_PATTERN:
        problems.append(f"{AUDIT_ARCHIVE} must archive every change event and no replay ({json.dumps(AUDIT_PATTERN)}), "
                        f"archives {json.dumps(archive.get('EventPattern'))}")
    rule = raw.get(AUDIT_RULE, {}).get("Properties", {})
    if rule.get("EventBusName") != {"Ref": CHANGE_BUS}:
        problems.append(f"{AUDIT_RULE} must be on {CHANGE_BUS}, is on {json.dumps(rule.get('EventBusName'))}")
    if rule.get("EventPattern") != AUDIT_PATTERN:
        problems.append(f"{AUDIT_RULE} must match every change event and no replay ({json.dumps(AUDIT_PATTERN)}), "
                        f"matches {json.dumps(rule.get('EventPattern'))}")
    if rule.get("State", "ENABLED") != "ENABLED":
        problems.append(f"{AUDIT_RULE} is {rule.get('State')}")
    targets = rule.get("Targets", [])
    if (len(targets) != 1 or set(targets[0]) - {"Id", "Arn", "RetryPolicy", "DeadLetterConfig"}
            or "Fn::GetAtt" not in json.dumps(targets[0].get("Arn")) and targets[0].get("Arn") != AUDIT_TARGET):
        problems.append(f"{AUDIT_RULE} must deliver each event whole (no Input, InputPath, InputTransformer, "
                        f"RoleArn) to {AUDIT_LOGS} only, delivers to {json.dumps(targets)}")
    elif targets[0].get("Arn") != AUDIT_TARGET:
        problems.append(f"{AUDIT_RULE}'s target must be {AUDIT_LOGS}'s own ARN {json.dumps(AUDIT_TARGET)}, without "
                        f"the :* its Arn attribute ends in, is {json.dumps(targets[0].get('Arn'))}")
    if not any(r.get("Type") == "AWS::CloudWatch::Alarm" and r.get("Condition") == CHANGE_CONDITION
               and r.get("Properties", {}).get("ComparisonOperator") == "GreaterThanThreshold"
               and r.get("Properties", {}).get("Threshold") == 0
               and any((namespace, metric, statistic) == ("AWS/Events", "FailedInvocations", "Sum")
                       and json.loads(json.dumps(dimensions)) == AUDIT_DIMENSIONS
                       for namespace, metric, statistic, dimensions in alarm_metrics(r.get("Properties", {})))
               for r in raw.values()):
        problems.append(f"no alarm fires when {AUDIT_RULE} fails to deliver (AWS/Events FailedInvocations, Sum > 0, "
                        f"dimensions {json.dumps(AUDIT_DIMENSIONS)}, with {CHANGE_CONDITION})")
    outputs = template.get("Outputs", {})
    for output, value in AUDIT_OUTPUTS.items():
        if outputs.get(output, {}).get("Value") != value or outputs.get(output, {}).get("Condition") != CHANGE_CONDITION:
            problems.append(f"output {output} must name the audit trail ({json.dumps(value)}) with {CHANGE_CONDITION}")
    return problems


def _pipe(template, name):
    return template["Resources"][name]["Properties"]


_FIELD_LIST = "[<$.dynamodb.NewImage.updated_fields.SS>]"


def _edit_template(template, pipe, old, new):
    """Replaces `old` (which must be there) in a pipe's InputTemplate."""
    target = _pipe(template, pipe)["TargetParameters"]
    if old not in target["InputTemplate"]:
        raise KeyError(f"{old!r} is not in {pipe}'s InputTemplate")
    target["InputTemplate"] = target["InputTemplate"].replace(old, new)


def _statements(template, role):
    return [s for p in template["Resources"][role]["Properties"]["Policies"]
            for s in p["PolicyDocument"]["Statement"]]


# Ways to break the change events, each of which check_change_events must
# notice: (what, how to break a copy of the template).
CHANGE_EVENT_BREAKAGES = [
    ("a secret in the event", lambda t: _pipe(t, "ApiKeysChangePipe")["TargetParameters"].update(
        InputTemplate='{"id": "<$.dynamodb.NewImage.id.S>", "version": "<$.dynamodb.NewImage.version.N>", '
                      '"updated_at": "<$.dynamodb.NewImage.updated_at.S>", "api_key": "<$.dynamodb.NewImage.api_key.S>"}')),
    ("the headers in a field", lambda t: _pipe(t, "McpServersChangePipe")["TargetParameters"].update(
        InputTemplate=_pipe(t, "McpServersChangePipe")["TargetParameters"]["InputTemplate"].replace(
            "$.dynamodb.NewImage.updated_at.S", "$.dynamodb.NewImage.headers.M"))),
    ("the whole record", lambda t: _pipe(t, "ModelsChangePipe")["TargetParameters"].update(
        InputTemplate="<aws.pipes.event.json>")),
    ("the new image, unquoted", lambda t: _pipe(t, "ModelsChangePipe")["TargetParameters"].update(
        InputTemplate='{"id": "<$.dynamodb.NewImage.id.S>", "project_id": "<$.dynamodb.NewImage.project_id.S>", '
                      '"version": <$.dynamodb.NewImage>, "updated_at": "<$.dynamodb.NewImage.updated_at.S>"}')),
    ("a constant field", lambda t: _pipe(t, "ModelsChangePipe")["TargetParameters"].update(
        InputTemplate=_pipe(t, "ModelsChangePipe")["TargetParameters"]["InputTemplate"][:-1] + ', "name": "x"}')),
    ("no template (the whole record)", lambda t: _pipe(t, "ApiKeysChangePipe")["TargetParameters"].pop("InputTemplate")),
    ("the caller unquoted", lambda t: _edit_template(t, "ModelsChangePipe", '"<$.dynamodb.NewImage.updated_by.S>"',
                                                    "<$.dynamodb.NewImage.updated_by.S>")),
    ("the field list unbracketed", lambda t: _edit_template(t, "McpServersChangePipe", _FIELD_LIST,
                                                            "<$.dynamodb.NewImage.updated_fields.SS>")),
    ("the field list quoted", lambda t: _edit_template(t, "ApiKeysChangePipe", _FIELD_LIST,
                                                       '"<$.dynamodb.NewImage.updated_fields.SS>"')),
    ("no caller", lambda t: _edit_template(t, "ApiKeysChangePipe", ' "updated_by": "<$.dynamodb.NewImage.updated_by.S>",',
                                           "")),
    ("a name as the caller", lambda t: _edit_template(t, "ModelsChangePipe", "$.dynamodb.NewImage.updated_by.S",
                                                      "$.dynamodb.NewImage.name.S")),
    ("the headers as the field list", lambda t: _edit_template(t, "McpServersChangePipe", _FIELD_LIST,
                                                               "[<$.dynamodb.NewImage.headers.M>]")),
    ("INSERTs announced", lambda t: _pipe(t, "ModelsChangePipe")["SourceParameters"]["FilterCriteria"]["Filters"][0].update(
        Pattern='{"eventName": ["MODIFY", "INSERT"]}')),
    ("no filter", lambda t: _pipe(t, "McpServersChangePipe")["SourceParameters"].pop("FilterCriteria")),
    ("an enrichment", lambda t: _pipe(t, "ModelsChangePipe").update(Enrichment="arn:aws:lambda:us-east-1:1:function:f")),
    ("execution data logged", lambda t: _pipe(t, "ModelsChangePipe").update(
        LogConfiguration={"Level": "ERROR", "IncludeExecutionData": ["ALL"]})),
    ("retries forever", lambda t: _pipe(t, "ApiKeysChangePipe")["SourceParameters"]["DynamoDBStreamParameters"].pop(
        "MaximumRetryAttempts")),
    ("no dead-letter queue", lambda t: _pipe(t, "ApiKeysChangePipe")["SourceParameters"]["DynamoDBStreamParameters"].pop(
        "DeadLetterConfig")),
    ("another table's stream", lambda t: _pipe(t, "ModelsChangePipe").update(
        Source={"Fn::GetAtt": ["ApiKeysTable", "StreamArn"]})),
    ("a role reading items", lambda t: _statements(t, "ModelsChangePipeRole")[0]["Action"].append("dynamodb:GetItem")),
    ("a role reading every stream", lambda t: _statements(t, "McpServersChangePipeRole")[0].update(Resource="*")),
    ("a role publishing anywhere", lambda t: _statements(t, "ApiKeysChangePipeRole")[2].update(Resource="*")),
    ("a role decrypting directly", lambda t: _statements(t, "ModelsChangePipeRole")[1].pop("Condition")),
    ("a role with a wildcard", lambda t: _statements(t, "ModelsChangePipeRole")[3].update(Action="sqs:*")),
    ("a managed policy", lambda t: t["Resources"]["ModelsChangePipeRole"]["Properties"].update(
        ManagedPolicyArns=["arn:aws:iam::aws:policy/AmazonDynamoDBReadOnlyAccess"])),
    ("a role anyone may assume", lambda t: t["Resources"]["ModelsChangePipeRole"]["Properties"][
        "AssumeRolePolicyDocument"]["Statement"][0].update(Principal={"AWS": "*"})),
    ("a shared role", lambda t: _pipe(t, "ModelsChangePipe").update(RoleArn={"Fn::GetAtt": ["McpServersChangePipeRole", "Arn"]})),
    ("a table without a stream", lambda t: t["Resources"]["ModelsTable"]["Properties"].pop("StreamSpecification")),
    ("old images in the stream", lambda t: t["Resources"]["ApiKeysTable"]["Properties"].update(
        StreamSpecification={"StreamViewType": "NEW_AND_OLD_IMAGES"})),
    ("publishing off by default", lambda t: t["Parameters"]["PublishChangeEvents"].update(Default="false")),
    ("a pipe that ignores the parameter", lambda t: t["Resources"]["ModelsChangePipe"].pop("Condition")),
    ("an unencrypted dead-letter queue", lambda t: t["Resources"][CHANGE_DLQ]["Properties"].pop("SqsManagedSseEnabled")),
    ("no dead-letter alarm", lambda t: t["Resources"].pop("ChangeEventsDeadLetterAlarm")),
]


def self_test_change_events(template):
    """Every breakage in CHANGE_EVENT_BREAKAGES makes the check complain."""
    problems = []
    for what, breakage in CHANGE_EVENT_BREAKAGES:
        broken = copy.deepcopy(template)
        try:
            breakage(broken)
        except (KeyError, IndexError, TypeError, AttributeError) as error:
            problems.append(f"self-test: cannot make {what!r} ({error!r}); update CHANGE_EVENT_BREAKAGES")
            continue
        if not check_change_events(broken):
            problems.append(f"self-test: the change-event check misses {what}")
    return problems


def load_pipes_module():
    """tools/events/pipes.py, the emulation of the pipes' filter and input
    template (loaded by path: the standard library has a `pipes` too)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "events", "pipes.py")
    spec = importlib.util.spec_from_file_location("agent_server_pipes", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_record(table, with_writer):
    """A MODIFY stream record of `table` as a pipe receives it, carrying
    every kind of content (a sealed secret, headers, parameters, a name);
    with or without the writer's updated_by and updated_fields."""
    image = {
        "id": {"S": "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f"},
        "version": {"N": "2"},
        "created_at": {"S": "2026-01-01T00:00:00.000Z"},
        "updated_at": {"S": "2026-01-02T03:04:05.678Z"},
        "name": {"S": "a name"},
    }
    if table != "ApiKeysTable":
        image["project_id"] = {"S": "8a4b2c1d-3e5f-4a6b-8c7d-9e0f1a2b3c4d"}
    image.update({
        "ApiKeysTable": {"api_key": {"B": "c2VhbGVk"}, "enabled": {"BOOL": True}},
        "McpServersTable": {"endpoint": {"S": "https://mcp.example.com"},
                            "headers": {"M": {"Authorization": {"S": "Bearer x"}}}},
        "ModelsTable": {"model_id": {"S": "m"}, "parameters": {"M": {"t": {"N": "0.5"}}}},
    }[table])
    if with_writer:
        image["updated_by"] = {"S": "arn:aws:iam::123456789012:user/someone"}
        image["updated_fields"] = {"SS": ["name", "enabled"]}
    return {"eventID": "1", "eventName": "MODIFY", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1", "dynamodb": {"Keys": {"id": image["id"]}, "NewImage": image,
                                                   "StreamViewType": "NEW_IMAGE"},
            "eventSourceARN": f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/x"}


def check_rendering(schema, template):
    """What each pipe's InputTemplate (as pipes.py renders it, following
    AWS's rules) makes of a record written through the API, and of one
    written outside it (no updated_by, no updated_fields), is an event
    events.schema.json accepts; the schema refuses the field list flat."""
    import jsonschema
    pipes = load_pipes_module()
    validator = jsonschema.Draft202012Validator(schema)
    problems = []
    for name, resource in template.get("Resources", {}).items():
        if resource.get("Type") != "AWS::Pipes::Pipe":
            continue
        source = resource.get("Properties", {}).get("Source", {})
        table = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
        if table not in CHANGE_PIPES:
            continue
        pipe = pipes.Pipe(name, table, json.loads(json.dumps(resource["Properties"])))
        for with_writer in (True, False):
            what = "an API write" if with_writer else "a record without updated_by and updated_fields"
            try:
                event = pipe.event(sample_record(table, with_writer))
            except pipes.TemplateError as error:
                problems.append(f"{name} cannot render {what}: {error}")
                continue
            if event is None:
                problems.append(f"{name}'s filter drops a MODIFY record")
                continue
            errors = list(validator.iter_errors(event))
            if errors:
                problems.append(f"events.schema.json refuses what {name} makes of {what}: "
                                f"{errors[0].message} at {list(errors[0].path)}: {json.dumps(event['detail'])}")
            if with_writer:
                flat = {**event, "detail": {**event["detail"], "updated_fields": ["name"]}}
                if validator.is_valid(flat):
                    problems.append("events.schema.json accepts updated_fields as a flat list, which no pipe renders")
    return problems


def check_event_schema(schema, template=None):
    """events.schema.json describes what the pipes publish: a valid JSON
    Schema (2020-12) whose source, detail types and detail fields are the
    pipes', with no other detail field allowed, accepting what the pipes
    make of records with and without the writer's attributes."""
    import jsonschema
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as error:
        return [f"events.schema.json is not a valid JSON Schema: {error.message}"]
    problems = []
    if schema.get("$schema") != "https://json-schema.org/draft/2020-12/schema":
        problems.append("events.schema.json must declare draft 2020-12")
    properties = schema.get("properties", {})
    if properties.get("source") != {"const": EVENT_SOURCE}:
        problems.append(f"events.schema.json must fix source to {EVENT_SOURCE}")
    detail_types = sorted(detail_type for _, _, detail_type, _ in CHANGE_PIPES.values())
    if sorted(properties.get("detail-type", {}).get("enum", [])) != detail_types:
        problems.append(f"events.schema.json's detail-type enum must be {detail_types}")
    detail = schema.get("$defs", {}).get("detail", {})
    if properties.get("detail") != {"$ref": "#/$defs/detail"} or detail.get("additionalProperties") is not False:
        problems.append("events.schema.json's detail must be $defs/detail, with additionalProperties false")
    if sorted(detail.get("properties", {})) != sorted(EVENT_FIELDS):
        problems.append(f"events.schema.json's detail fields must be {sorted(EVENT_FIELDS)}, "
                        f"are {sorted(detail.get('properties', {}))}")
    # Every pipe renders every field (project_id on MCP servers and models
    # only, which the schema's allOf says).
    required = sorted(set(EVENT_FIELDS) - {"project_id"})
    if sorted(detail.get("required", [])) != required:
        problems.append(f"events.schema.json's detail must require {required}, requires {detail.get('required')}")
    if template is not None and not problems:
        problems += check_rendering(schema, template)
    return problems


SCHEMA_BREAKAGES = [
    ("a secret field in the schema", lambda s: s["$defs"]["detail"]["properties"].update(api_key={"type": "string"})),
    ("any detail field allowed", lambda s: s["$defs"]["detail"].pop("additionalProperties")),
    ("a detail type no pipe publishes", lambda s: s["properties"]["detail-type"]["enum"].append("Key deleted")),
    ("the absent caller refused", lambda s: s["$defs"]["detail"]["properties"]["updated_by"].update(minLength=1)),
    ("the absent field list refused", lambda s: s["$defs"]["detail"]["properties"]["updated_fields"].update(minItems=1)),
    ("the field list flat", lambda s: s["$defs"]["detail"]["properties"]["updated_fields"].update(
        items={"type": "string"})),
    ("the field list nested or flat", lambda s: s["$defs"]["detail"]["properties"]["updated_fields"].pop("items")),
    ("no caller required", lambda s: s["$defs"]["detail"]["required"].remove("updated_by")),
]


def translate(template):
    """The template as the SAM translator makes it (the resources
    CloudFormation receives)."""
    translated = copy.deepcopy(template)
    # The translator needs an S3 CodeUri; `sam build` supplies one on deploy.
    for holder in [translated.get("Globals", {}).get("Function", {})] + [
            r.get("Properties", {}) for r in translated.get("Resources", {}).values()]:
        if holder.get("CodeUri") == ".":
            holder["CodeUri"] = "s3://bucket/code.zip"
    return transform(translated, {}, NoManagedPolicies())["Resources"]


def problems_of(template):
    """Everything the checks find in a template (no self-test)."""
    resources = translate(template)
    problems = []
    for mode, values in MODES.items():
        problems += check_routes(mode, template, resources, values)
    for tracing in ("true", "false"):
        _, conditions = conditions_for(template, {"EnableTracing": tracing})
        for function, table, log_group in ROUTES.values():
            problems += [f"with EnableTracing={tracing}: {p}" if tracing == "false" else p
                         for p in check_function(resources, function, table, log_group, conditions)]
    problems += check_no_other_iam(resources)
    problems += check_rules(template)
    problems += check_environment(template, resources)
    problems += check_operations(template, resources)
    problems += check_guards(template, resources)
    problems += check_tracing(template, resources)
    problems += check_dashboard(template)
    problems += check_secrets_key(template)
    problems += check_change_events(template)
    problems += check_audit_trail(template)
    return list(dict.fromkeys(problems))


def _resource(template, name):
    return template["Resources"][name]["Properties"]


def _policy(template, role, name):
    """The statements of one inline policy of a role, by PolicyName."""
    for policy in template["Resources"][role]["Properties"]["Policies"]:
        if isinstance(policy, dict) and policy.get("PolicyName") == name:
            return policy["PolicyDocument"]["Statement"]
    raise KeyError(f"{role} has no policy {name}")


def _dashboard_parts(template):
    return template["Resources"][DASHBOARD]["Properties"]["DashboardBody"]["Fn::Join"][1]


def _edit_dashboard(template, old, new):
    """Replaces `old` (which must be there) in the dashboard's Fn::Sub texts."""
    found = False

    def edit(value):
        nonlocal found
        if isinstance(value, dict):
            if list(value) == ["Fn::Sub"] and isinstance(value["Fn::Sub"], str) and old in value["Fn::Sub"]:
                found = True
                return {"Fn::Sub": value["Fn::Sub"].replace(old, new)}
            return {k: edit(v) for k, v in value.items()}
        if isinstance(value, list):
            return [edit(v) for v in value]
        return value
    properties = template["Resources"][DASHBOARD]["Properties"]
    properties["DashboardBody"] = edit(properties["DashboardBody"])
    if not found:
        raise KeyError(f"{old!r} is not in the dashboard")


def _variables(template, function):
    return template["Resources"][function]["Properties"]["Environment"]["Variables"]


def _key_statements(template):
    return template["Resources"][SECRETS_KEY]["Properties"]["KeyPolicy"]["Statement"]


def _readers_statement(template):
    return _key_statements(template)[1]["Fn::If"][1]


# Ways to break the template, each of which problems_of must notice with a
# problem containing the given text: (what, how to break a copy, text).
BREAKAGES = [
    ("a function role decrypting secrets", lambda t: _policy(t, "UpdateApiKeyRole", "seal-api-key").append(
        {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": {"Fn::GetAtt": [SECRETS_KEY, "Arn"]}}),
     "no function may decrypt"),
    ("a function role re-encrypting secrets", lambda t: _policy(t, "UpdateApiKeyRole", "seal-api-key")[0].update(
        Action=["kms:Encrypt", "kms:ReEncryptFrom"]), "no function may decrypt"),
    ("kms:Encrypt for any field", lambda t: _policy(t, "UpdateApiKeyRole", "seal-api-key")[0]["Condition"].pop(
        "StringEquals"), "may call kms:Encrypt under"),
    ("kms:Encrypt with any context keys", lambda t: _policy(t, "UpdateApiKeyRole", "seal-api-key")[0]["Condition"].pop(
        "ForAllValues:StringEquals"), "may call kms:Encrypt under"),
    ("kms:Encrypt with an empty context", lambda t: _policy(t, "UpdateApiKeyRole", "seal-api-key")[0]["Condition"].pop(
        "Null"), "may call kms:Encrypt under"),
    ("kms:Encrypt under the tables' key", lambda t: _policy(t, "UpdateApiKeyRole", "seal-api-key")[0].update(
        Resource={"Fn::GetAtt": [TABLES_KEY, "Arn"]}), "may call kms:Encrypt on"),
    ("no kms:DescribeKey", lambda t: _policy(t, "UpdateApiKeyRole", "seal-api-key").pop(1), "lacks"),
    ("the MCP function sealing", lambda t: _resource(t, "UpdateMcpServerRole")["Policies"].append(
        copy.deepcopy(_resource(t, "UpdateApiKeyRole")["Policies"][1])), "only UpdateApiKeyFunction needs"),
    ("SECRETS_KEY_ID naming the tables' key", lambda t: _variables(t, SEALING_FUNCTION).update(
        SECRETS_KEY_ID={"Fn::GetAtt": [TABLES_KEY, "Arn"]}), "SECRETS_KEY_ID"),
    ("no SECRETS_KEY_ID", lambda t: _variables(t, SEALING_FUNCTION).pop("SECRETS_KEY_ID"), "SECRETS_KEY_ID"),
    ("a KMS endpoint as deployed", lambda t: _variables(t, SEALING_FUNCTION).update(
        AWS_ENDPOINT_URL_KMS="http://127.0.0.1:4566"), "for sam local only"),
    ("a KMS endpoint on the model function", lambda t: _variables(t, "UpdateModelFunction").update(
        AWS_ENDPOINT_URL_KMS={"Fn::If": ["UseLocalKms", {"Ref": "LocalKmsEndpoint"}, {"Ref": "AWS::NoValue"}]}),
        "only UpdateApiKeyFunction may have"),
    ("SECRETS_KEY_ID on the model function", lambda t: _variables(t, "UpdateModelFunction").update(
        SECRETS_KEY_ID={"Fn::GetAtt": [SECRETS_KEY, "Arn"]}), "only UpdateApiKeyFunction may have"),
    ("a table sealed with the secrets key", lambda t: _resource(t, "ModelsTable")["SSESpecification"].update(
        KMSMasterKeyId={"Ref": SECRETS_KEY}), "encrypted with the tables' DataKey"),
    ("a secrets key without rotation", lambda t: _resource(t, SECRETS_KEY).update(EnableKeyRotation=False),
     "must rotate"),
    ("a secrets key without EnableKeyRotation", lambda t: _resource(t, SECRETS_KEY).pop("EnableKeyRotation"),
     "must rotate"),
    ("a secrets key deleted with the stack", lambda t: t["Resources"][SECRETS_KEY].pop("DeletionPolicy"),
     "must be retained"),
    ("no account administration of the secrets key", lambda t: _key_statements(t).pop(0),
     "administration statement"),
    ("readers decrypting any field", lambda t: _readers_statement(t)["Condition"].pop("StringEquals"),
     "key policy must grant"),
    ("anyone decrypting", lambda t: _readers_statement(t)["Condition"].pop("ArnEquals"), "key policy must grant"),
    ("readers always granted", lambda t: _key_statements(t).__setitem__(1, _readers_statement(t)),
     "key policy must grant"),
    ("a wildcard reader", lambda t: t["Parameters"]["SecretReaderRoleArns"].update(AllowedPattern=".*"),
     "AllowedPattern"),
    ("no archive", lambda t: t["Resources"].pop(AUDIT_ARCHIVE), AUDIT_ARCHIVE),
    ("an audit log deleted with the stack", lambda t: t["Resources"][AUDIT_LOGS].pop("DeletionPolicy"),
     "must be retained"),
    ("a named audit log", lambda t: _resource(t, AUDIT_LOGS).update(LogGroupName="/aws/events/changes"),
     "must be unnamed"),
    ("a retained archive", lambda t: t["Resources"][AUDIT_ARCHIVE].update(DeletionPolicy="Retain"),
     "must go with the bus"),
    ("an archive of another bus", lambda t: _resource(t, AUDIT_ARCHIVE).update(
        SourceArn={"Fn::Sub": "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:event-bus/default"}),
     "must archive ChangeEventBus"),
    ("an archive kept for ever whatever the parameter", lambda t: _resource(t, AUDIT_ARCHIVE).update(RetentionDays=0),
     "AuditRetentionDays"),
    ("an archive of replays too", lambda t: _resource(t, AUDIT_ARCHIVE)["EventPattern"].pop("replay-name"),
     "no replay"),
    ("an audit log group kept for ever", lambda t: _resource(t, AUDIT_LOGS).pop("RetentionInDays"),
     "RetentionInDays must be"),
    ("an audit log group with RetentionInDays 0", lambda t: _resource(t, AUDIT_LOGS).update(
        RetentionInDays={"Ref": "AuditRetentionDays"}), "CloudWatch Logs refuses 0"),
    ("a retention CloudWatch Logs refuses", lambda t: t["Parameters"]["AuditRetentionDays"]["AllowedValues"].append(2),
     "AuditRetentionDays must be"),
    ("replays logged again", lambda t: _resource(t, AUDIT_RULE)["EventPattern"].pop("replay-name"), "no replay"),
    ("only model changes audited", lambda t: _resource(t, AUDIT_RULE)["EventPattern"].update(
        {"detail-type": ["Model updated"]}), "every change event"),
    ("an audit log of details only", lambda t: _resource(t, AUDIT_RULE)["Targets"][0].update(InputPath="$.detail"),
     "deliver each event whole"),
    ("an audit rule on the default bus", lambda t: _resource(t, AUDIT_RULE).update(EventBusName="default"),
     "must be on ChangeEventBus"),
    ("an audit trail without change events", lambda t: t["Resources"][AUDIT_RULE].pop("Condition"),
     "exists with PublishesChangeEvents"),
    ("no resource policy", lambda t: t["Resources"].pop(AUDIT_POLICY), AUDIT_POLICY),
    ("a resource policy for every group", lambda t: _resource(t, AUDIT_POLICY).update(PolicyDocument={
        "Fn::Sub": _resource(t, AUDIT_POLICY)["PolicyDocument"]["Fn::Sub"].replace("${ChangeAuditLogs.Arn}", "*")}),
     "not only on"),
    ("a resource policy under a condition", lambda t: _resource(t, AUDIT_POLICY).update(PolicyDocument={
        "Fn::Sub": _resource(t, AUDIT_POLICY)["PolicyDocument"]["Fn::Sub"].replace(
            '"Resource": "${ChangeAuditLogs.Arn}"}',
            '"Resource": "${ChangeAuditLogs.Arn}", "Condition": {"ArnEquals": {"aws:SourceArn": "${ChangeAuditRule.Arn}"}}}')}),
     "not only under"),
    ("a resource policy without PutLogEvents", lambda t: _resource(t, AUDIT_POLICY).update(PolicyDocument={
        "Fn::Sub": _resource(t, AUDIT_POLICY)["PolicyDocument"]["Fn::Sub"].replace(', "logs:PutLogEvents"', "")}),
     "does not let EventBridge"),
    ("a resource policy for anyone", lambda t: _resource(t, AUDIT_POLICY).update(PolicyDocument={
        "Fn::Sub": _resource(t, AUDIT_POLICY)["PolicyDocument"]["Fn::Sub"].replace('"events.amazonaws.com"', '"*"', 1)}),
     "not exactly EventBridge"),
    ("a resource policy without the log-delivery service", lambda t: _resource(t, AUDIT_POLICY).update(PolicyDocument={
        "Fn::Sub": _resource(t, AUDIT_POLICY)["PolicyDocument"]["Fn::Sub"].replace(
            ', "delivery.logs.amazonaws.com"', "", 1)}), "not exactly EventBridge"),
    ("a resource policy for EventBridge alone", lambda t: _resource(t, AUDIT_POLICY).update(PolicyDocument={
        "Fn::Sub": _resource(t, AUDIT_POLICY)["PolicyDocument"]["Fn::Sub"].replace(
            '["events.amazonaws.com", "delivery.logs.amazonaws.com"]', '"events.amazonaws.com"')}),
     "not exactly EventBridge"),
    ("an audit target ending in :*", lambda t: _resource(t, AUDIT_RULE)["Targets"][0].update(
        Arn={"Fn::GetAtt": [AUDIT_LOGS, "Arn"]}), "own ARN"),
    ("an audit target in another group", lambda t: _resource(t, AUDIT_RULE)["Targets"][0].update(
        Arn={"Fn::Sub": "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:/aws/events/x"}),
     "deliver each event whole"),
    ("no audit delivery alarm", lambda t: t["Resources"].pop("ChangeAuditFailedAlarm"), "fails to deliver"),
    ("an audit alarm on the default bus", lambda t: _resource(t, "ChangeAuditFailedAlarm")["Dimensions"].pop(0),
     "fails to deliver"),
    ("an audit alarm on successes", lambda t: _resource(t, "ChangeAuditFailedAlarm").update(MetricName="Invocations"),
     "fails to deliver"),
    ("a silent audit alarm", lambda t: _resource(t, "ChangeAuditFailedAlarm").update(AlarmActions=[]),
     "does not notify AlarmTopic"),
    ("the audit alarm off the dashboard", lambda t: _edit_dashboard(t, ', "${ChangeAuditFailedAlarm.Arn}"', ""),
     "every alarm"),
    ("no pipe failure alarm", lambda t: t["Resources"].pop("ChangeEventPipesFailedAlarm"), "fails an execution"),
    ("one pipe's failures unwatched", lambda t: _resource(t, "ChangeEventPipesFailedAlarm")["Metrics"][3][
        "MetricStat"]["Metric"].update(Dimensions=[{"Name": "PipeName", "Value": {"Ref": "McpServersChangePipe"}}]),
     "ModelsChangePipe fails an execution"),
    ("the pipe alarm off the dashboard", lambda t: _edit_dashboard(t, ', "${ChangeEventPipesFailedAlarm.Arn}"', ""),
     "every alarm"),
    ("no archive output", lambda t: t["Outputs"].pop("ChangeEventArchiveName"), "output ChangeEventArchiveName"),
    ("no METRICS_NAMESPACE", lambda t: t["Globals"]["Function"]["Environment"]["Variables"].pop("METRICS_NAMESPACE"),
     "METRICS_NAMESPACE"),
    ("a fixed metrics namespace", lambda t: _variables(t, "UpdateModelFunction").update(METRICS_NAMESPACE="AgentServer"),
     "METRICS_NAMESPACE"),
    ("a table without deletion protection", lambda t: _resource(t, "McpServersTable").pop("DeletionProtectionEnabled"),
     "DeletionProtectionEnabled"),
    ("deletion protection off", lambda t: _resource(t, "ApiKeysTable").update(DeletionProtectionEnabled=False),
     "DeletionProtectionEnabled"),
    ("reserved concurrency 0 when empty", lambda t: t["Globals"]["Function"].update(
        ReservedConcurrentExecutions={"Ref": "ReservedConcurrency"}), "left out when empty"),
    ("no reserved concurrency", lambda t: t["Globals"]["Function"].pop("ReservedConcurrentExecutions"),
     "ReservedConcurrentExecutions"),
    ("reserved concurrency 0 allowed", lambda t: t["Parameters"]["ReservedConcurrency"].update(
        AllowedPattern="[0-9]*"), "0 stops the function"),
    ("no latency alarm", lambda t: t["Resources"].pop("ApiLatencyAlarm"), "p99 Latency"),
    ("a p50 latency alarm", lambda t: _resource(t, "ApiLatencyAlarm").update(ExtendedStatistic="p50"), "p99 Latency"),
    ("a fixed latency threshold", lambda t: _resource(t, "ApiLatencyAlarm").update(Threshold=5000), "p99 Latency"),
    ("no 4xx rate alarm", lambda t: t["Resources"].pop("Api4xxRateAlarm"), "4xx rate"),
    ("a 4xx count instead of a rate", lambda t: _resource(t, "Api4xxRateAlarm")["Metrics"][0].update(
        Expression="FILL(errors, 0)"), "4xx rate"),
    ("a 4xx rate over 5xx", lambda t: _resource(t, "Api4xxRateAlarm")["Metrics"][1]["MetricStat"]["Metric"].update(
        MetricName="5xx"), "4xx rate"),
    ("tracing off by default", lambda t: t["Parameters"]["EnableTracing"].update(Default="false"),
     "EnableTracing must"),
    ("tracing always on", lambda t: t["Globals"]["Function"].update(Tracing="Active"), "tracing mode"),
    ("no tracing", lambda t: t["Globals"]["Function"].pop("Tracing"), "tracing mode"),
    ("X-Ray permissions with tracing off", lambda t: _resource(t, "UpdateModelRole")["Policies"].__setitem__(
        -1, _resource(t, "UpdateModelRole")["Policies"][-1]["Fn::If"][1]), "with tracing off"),
    ("no X-Ray permission", lambda t: _resource(t, "UpdateApiKeyRole")["Policies"].pop(), "lacks"),
    ("another action on *", lambda t: _resource(t, "UpdateMcpServerRole")["Policies"][-1]["Fn::If"][1][
        "PolicyDocument"]["Statement"][0]["Action"].append("dynamodb:UpdateItem"), 'on "*"'),
    ("every X-Ray action", lambda t: _resource(t, "UpdateMcpServerRole")["Policies"][-1]["Fn::If"][1][
        "PolicyDocument"]["Statement"][0].update(Action="xray:*"), "which no function needs"),
    ("no dashboard", lambda t: t["Resources"].pop(DASHBOARD), "no Dashboard"),
    ("a fixed namespace on the dashboard", lambda t: _edit_dashboard(t, METRICS_NS, "AgentServer"),
     "not from MetricsNamespace"),
    ("no cold starts", lambda t: _edit_dashboard(t, '"ColdStart"', '"Cold"'), "ColdStart"),
    ("no init duration", lambda t: _edit_dashboard(t, "initDurationMs", "durationMs"), "init duration"),
    ("no p99 API latency", lambda t: _edit_dashboard(t, '"stat": "p99", "label": "Latency p99"',
                                                     '"stat": "p90", "label": "Latency p90"'), "Latency"),
    ("no conflict outcome", lambda t: _edit_dashboard(t, '"Outcome", "conflict"', '"Outcome", "clash"'), "conflict"),
    ("no DynamoDB throttles", lambda t: _edit_dashboard(t, '"ThrottledRequests"', '"SystemErrors"'),
     "ThrottledRequests"),
    ("no consumed capacity", lambda t: _edit_dashboard(t, '"ConsumedWriteCapacityUnits"', '"ConsumedReadCapacityUnits"'),
     "ConsumedWriteCapacityUnits"),
    ("one function's throttles missing", lambda t: _edit_dashboard(t, '"Throttles", "FunctionName", "${UpdateModelFunction}"',
                                                                   '"Errors", "FunctionName", "${UpdateModelFunction}"'),
     "Throttles"),
    ("the dead-letter widget always", lambda t: _dashboard_parts(t).__setitem__(3, _dashboard_parts(t)[3]["Fn::If"][1]),
     "must not show the change events"),
    ("no dead-letter widget", lambda t: _dashboard_parts(t)[3]["Fn::If"].__setitem__(1, ""), "must show the change"),
    ("an alarm off the dashboard", lambda t: _edit_dashboard(t, ', "${ApiLatencyAlarm.Arn}"', ""), "every alarm"),
    ("a dashboard that ignores PublishChangeEvents", lambda t: _dashboard_parts(t).__setitem__(
        1, _dashboard_parts(t)[1]["Fn::If"][1]), "every alarm"),
    ("a silent 4xx rate alarm", lambda t: _resource(t, "Api4xxRateAlarm").update(AlarmActions=[]),
     "does not notify AlarmTopic"),
]


def self_test(template):
    """Every breakage in BREAKAGES makes problems_of complain as expected."""
    problems = []
    for what, breakage, expected in BREAKAGES:
        broken = copy.deepcopy(template)
        try:
            breakage(broken)
            found = problems_of(broken)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as error:
            problems.append(f"self-test: cannot make {what!r} ({error!r}); update BREAKAGES")
            continue
        if not any(expected in problem for problem in found):
            problems.append(f"self-test: the check misses {what} (expected a problem with {expected!r}, "
                            f"found {found[:3]})")
    return problems


def check(template_text, schema=None):
    template = yaml_parse(template_text)
    problems = problems_of(template)
    # The self-tests assume a template the check accepts.
    if not problems:
        problems += self_test_change_events(template) + self_test(template)
    if schema is not None:
        schema_problems = check_event_schema(schema, template)
        problems += schema_problems
        for what, breakage in [] if schema_problems else SCHEMA_BREAKAGES:
            broken = copy.deepcopy(schema)
            breakage(broken)
            if not check_event_schema(broken, template):
                problems.append(f"self-test: the event-schema check misses {what}")
    return problems


def main():
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    text = open(path).read()
    # The change events' JSON Schema lives beside the template.
    with open(os.path.join(os.path.dirname(os.path.abspath(path)), "events.schema.json")) as schema_file:
        schema = json.load(schema_file)
    problems = list(dict.fromkeys(check(text, schema)))  # one line per problem, in order
    for problem in problems:
        print(f"template check: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(
        "template check: every route needs IAM (default) or JWT authorization (with the audience, and "
        "the scopes if any, required); each function may only UpdateItem its own table and write its "
        "own log group, and logs JSON with START/REPORT records; the stage writes a JSON access log; "
        "alarms on the API (5xx, p99 latency, 4xx rate), functions and tables notify AlarmTopic; the tables "
        "have deletion protection and reserved concurrency follows its parameter; the dashboard shows every "
        "route's metrics, latency, cold starts, throttles, capacity and alarms; each table's change-event pipe "
        f"publishes MODIFYs only, with an allow-listed detail, under a role that may only read its stream "
        f"and publish, as events.schema.json describes, with an alarm on failed pipe executions, and an audit "
        f"log group (the rule's target its own ARN, under AWS's documented resource policy, failed deliveries "
        f"alarmed) and an archive keep every change event; api_key is sealed under a key of its own that no function may decrypt ({len(CHANGE_EVENT_BREAKAGES) + len(SCHEMA_BREAKAGES) + len(BREAKAGES)} "
        "ways of breaking that are caught)"
    )


if __name__ == "__main__":
    main()
