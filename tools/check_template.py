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

Run with the tools virtualenv's Python: `make validate` does.
"""

import json
import os
import sys

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

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


def check_function(resources, function, table, log_group):
    """The function logs JSON, START/REPORT records included, to its own group;
    its role, written in the template, may do nothing but TABLE_ACTIONS on
    its own table and LOG_ACTIONS on its own log group."""
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
    role = role.get("Properties", {})
    if role.get("ManagedPolicyArns"):
        problems.append(f"{role_name} has managed policies {json.dumps(role['ManagedPolicyArns'])}")
    trust = role.get("AssumeRolePolicyDocument", {}).get("Statement", [])
    principals = [as_list(s.get("Principal", {}).get("Service")) for s in trust]
    if principals != [["lambda.amazonaws.com"]] or len(trust) != 1:
        problems.append(f"{role_name} may be assumed by {json.dumps([s.get('Principal') for s in trust])}")
    own_table = {"Fn::GetAtt": [table, "Arn"]}
    own_logs = {"Fn::GetAtt": [log_group, "Arn"]}
    granted = set()
    for policy in role.get("Policies", []):
        for statement in as_list(policy["PolicyDocument"]["Statement"]):
            if statement.get("Effect") != "Allow":
                continue
            if set(statement) - {"Effect", "Action", "Resource", "Sid"}:
                problems.append(f"{role_name} has a statement with {sorted(statement)}: {json.dumps(statement)}")
            actions = as_list(statement.get("Action", []))
            resources_of = as_list(statement.get("Resource", []))
            for action in actions:
                allowed = TABLE_ACTIONS if action in TABLE_ACTIONS else LOG_ACTIONS if action in LOG_ACTIONS else None
                target = own_table if allowed is TABLE_ACTIONS else own_logs
                if allowed is None:
                    problems.append(f"{role_name} may call {action}, which no function needs")
                elif resources_of != [target]:
                    problems.append(f"{role_name} may call {action} on {json.dumps(resources_of)}, not only on {json.dumps(target)}")
                else:
                    granted.add(action)
    missing = ({"dynamodb:UpdateItem"} | LOG_ACTIONS) - granted
    if missing:
        problems.append(f"{role_name} lacks {sorted(missing)} on its own table or log group")
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


def conditions_for(template, values):
    params = {name: p.get("Default") for name, p in template.get("Parameters", {}).items()}
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
    for function, _, _ in ROUTES.values():
        variables = resources.get(function, {}).get("Properties", {}).get("Environment", {}).get("Variables", {})
        if variables.get("PROJECTS_CLAIM") != {"Ref": "JwtProjectsClaim"}:
            problems.append(f"{function} does not get PROJECTS_CLAIM from JwtProjectsClaim")
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


def check(template_text):
    template = yaml_parse(template_text)
    # The translator needs an S3 CodeUri; `sam build` supplies one on deploy.
    translated = yaml_parse(template_text.replace("CodeUri: .", "CodeUri: s3://bucket/code.zip"))
    resources = transform(translated, {}, NoManagedPolicies())["Resources"]
    problems = []
    for mode, values in MODES.items():
        problems += check_routes(mode, template, resources, values)
    for function, table, log_group in ROUTES.values():
        problems += check_function(resources, function, table, log_group)
    problems += check_no_other_iam(resources)
    problems += check_rules(template)
    problems += check_environment(template, resources)
    problems += check_operations(template, resources)
    return problems


def main():
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    text = open(sys.argv[1] if len(sys.argv) > 1 else "template.yaml").read()
    problems = list(dict.fromkeys(check(text)))  # one line per problem, in order
    for problem in problems:
        print(f"template check: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(
        "template check: every route needs IAM (default) or JWT authorization (with the audience, and "
        "the scopes if any, required); each function may only UpdateItem its own table and write its "
        "own log group, and logs JSON with START/REPORT records; the stage writes a JSON access log; "
        "alarms on the API, functions and tables notify AlarmTopic"
    )


if __name__ == "__main__":
    main()
