"""Properties of the stack a template describes, checked on the template as
written and on it after SAM's transform (aws-sam-translator, offline): what
CloudFormation would deploy.

- only-way-in: a request reaches a function only through an API route that
  requires authorization. Every Lambda permission is API Gateway's, for one
  method and path of an API whose every route requires IAM or a JWT
  authorizer, under every choice of the template's conditions; no function
  URL, event source mapping or other resource refers to a function except
  the API's own integrations, its permissions, and read-only monitoring.
- grants: each function's role allows the calls its code makes, on its own
  table and key (GRANTS below, what shared/src/writes.rs and seal/ call).

    python tools/stack_properties.py [TEMPLATE]   # exit 1 naming each broken property
    python tools/stack_properties.py TEMPLATE --transformed OUT.json   # also writes the transform

`make check-template TEMPLATE=path` runs it; `make validate` on template.yaml.
"""

import copy
import itertools
import json
import logging
import os
import re
import sys

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

# The transform counts metrics it never publishes offline, and says so on exit.
logging.getLogger("samtranslator.metrics").setLevel(logging.ERROR)

# The calls each function's code makes: (actions, the resource they are on).
GRANTS = {
    "UpdateApiKeyFunction": [
        (["dynamodb:UpdateItem", "dynamodb:GetItem"], "ApiKeysTable"),
        (["kms:Encrypt"], "SecretsKey"),
    ],
    "UpdateMcpServerFunction": [
        (["dynamodb:UpdateItem", "dynamodb:GetItem"], "McpServersTable"),
        (["kms:GenerateDataKey", "kms:Decrypt"], "SecretsKey"),
    ],
    "UpdateModelFunction": [(["dynamodb:UpdateItem", "dynamodb:GetItem"], "ModelsTable")],
}
FUNCTION_TYPES = ("AWS::Lambda::Function", "AWS::Serverless::Function")
API_TYPES = ("AWS::ApiGatewayV2::Api", "AWS::Serverless::HttpApi")
# What may refer to a function besides its API and its permissions: it reads, never invokes.
MONITORING = ("AWS::CloudWatch::", "AWS::Logs::", "AWS::IAM::Role")
OPERATIONS = ("get", "put", "post", "delete", "patch", "head", "options", "trace", "x-amazon-apigateway-any-method")


def refs(value):
    """Every logical id `value` refers to (Ref, GetAtt, ${X} or ${X.Attr} in Sub)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                yield inner
            elif key == "Fn::GetAtt":
                yield inner[0] if isinstance(inner, list) else str(inner).split(".")[0]
            elif key == "Fn::Sub":
                text = inner[0] if isinstance(inner, list) else inner
                yield from (name.split(".")[0] for name in re.findall(r"\$\{([^}!]+)\}", str(text)))
                yield from refs(inner[1] if isinstance(inner, list) and len(inner) > 1 else {})
            else:
                yield from refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from refs(inner)


def resolve(value, conditions):
    """`value` with each Fn::If taken as `conditions` choose; AWS::NoValue dropped."""
    if isinstance(value, dict):
        if set(value) == {"Fn::If"}:
            name, yes, no = value["Fn::If"]
            return resolve(yes if conditions.get(name, True) else no, conditions)
        out = {k: resolve(v, conditions) for k, v in value.items()}
        return {k: v for k, v in out.items() if v != {"Ref": "AWS::NoValue"}}
    if isinstance(value, list):
        resolved = (resolve(v, conditions) for v in value)
        return [v for v in resolved if v != {"Ref": "AWS::NoValue"}]
    return value


def choices(template):
    """Every assignment of the template's conditions (each free: a rule cannot know the parameters)."""
    names = sorted(template.get("Conditions", {}))
    for values in itertools.product([True, False], repeat=len(names)):
        yield dict(zip(names, values))


def authorized_routes(api, conditions):
    """(method, path) of every route in an API's body, and the problems with them:
    a route without security, or with a scheme that is not IAM or a JWT authorizer."""
    props = resolve(api.get("Properties", {}), conditions)
    body = props.get("Body") or props.get("DefinitionBody") or {}
    schemes = body.get("components", {}).get("securitySchemes", {})
    strong = {name for name, scheme in schemes.items() if isinstance(scheme, dict) and (
        scheme.get("x-amazon-apigateway-authtype") == "awsSigv4"
        or scheme.get("x-amazon-apigateway-authorizer", {}).get("type") in ("jwt", "request"))}
    routes, problems = set(), []
    if "Target" in props:
        problems.append("a quick-create Target (a default route without authorization)")
    for path, item in (body.get("paths") or {}).items():
        for method, operation in (item or {}).items():
            if method not in OPERATIONS:
                continue
            security = (operation or {}).get("security") or body.get("security") or []
            if not security or any(not req or not set(req) <= strong for req in security):
                problems.append(f"{method.upper()} {path} without IAM or a JWT authorizer")
            routes.add((method.upper(), path))
    return routes, problems


def route_matches(routes, method, path):
    """Whether an execute-api ARN's method and path name exactly one of `routes`
    (as SAM writes them: each `{parameter}` a `*`), not a wildcard over others."""
    return any(m == method and re.sub(r"\{[^}]+\}", "*", p) == path for m, p in routes)


def only_way_in(template):
    problems = []
    resources = template.get("Resources", {})
    functions = {name for name, r in resources.items() if r.get("Type") in FUNCTION_TYPES}
    apis = {name: r for name, r in resources.items() if r.get("Type") in API_TYPES}
    for conditions in choices(template):
        allowed = {}
        for name, api in apis.items():
            routes, broken = authorized_routes(api, conditions)
            problems += [f"API {name}: {p}" for p in broken]
            allowed[name] = routes
        for name, r in resources.items():
            kind, props = r.get("Type", ""), resolve(r.get("Properties", {}), conditions)
            targets = functions & set(refs(props))
            if r.get("Type") == "AWS::ApiGatewayV2::Route" and props.get("AuthorizationType", "NONE") == "NONE":
                problems.append(f"route {name} ({props.get('RouteKey')}) without authorization")
            if not targets or name in functions or kind in API_TYPES or kind.startswith(MONITORING):
                continue
            if kind == "AWS::Lambda::Permission":
                problems += permission_problems(name, props, apis, allowed)
            elif kind == "AWS::Serverless::Function":
                continue
            else:
                problems.append(f"{kind} {name} reaches {', '.join(sorted(targets))} other than through the API")
        for name in functions & set(resources):
            props = resolve(resources[name].get("Properties", {}), conditions)
            if "FunctionUrlConfig" in props:
                problems.append(f"function {name} has a function URL")
            for event_name, event in (props.get("Events") or {}).items():
                api = (event.get("Properties") or {}).get("ApiId", {})
                if event.get("Type") != "HttpApi" or not isinstance(api, dict) or api.get("Ref") not in apis:
                    problems.append(f"function {name}: event {event_name} ({event.get('Type')}) is not a route of the API")
                else:
                    method = str(event["Properties"].get("Method", "")).upper()
                    path = event["Properties"].get("Path", "")
                    if (method, path) not in allowed[api["Ref"]]:
                        problems.append(f"function {name}: {method} {path} is not an authorized route of {api['Ref']}")
    return sorted(set(problems))


def permission_problems(name, props, apis, allowed):
    """A Lambda permission is API Gateway's, for authorized routes of one of the template's APIs."""
    if props.get("Principal") != "apigateway.amazonaws.com" or props.get("Action") != "lambda:InvokeFunction":
        return [f"permission {name} lets {props.get('Principal')} call {props.get('Action')}"]
    source = props.get("SourceArn")
    sub = source.get("Fn::Sub") if isinstance(source, dict) else None
    text, variables = (sub if isinstance(sub, list) else [sub, {}]) if sub else ("", {})
    match = re.fullmatch(r"arn:\$\{AWS::Partition\}:execute-api:\$\{AWS::Region\}:\$\{AWS::AccountId\}:"
                         r"\$\{([^}]+)\}/[^/]+/([A-Z*]+)(/.*)", str(text))
    api = match and (variables.get(match.group(1), {}).get("Ref") if match.group(1) in variables else match.group(1))
    if not match or api not in apis:
        return [f"permission {name}: its SourceArn names no API of this template"]
    method, path = match.group(2), match.group(3)
    if not route_matches(allowed[api], method, path):
        return [f"permission {name}: {method} {path} is not one authorized route of {api}"]
    return []


def grants(template):
    problems = []
    resources = template.get("Resources", {})
    for function, needs in GRANTS.items():
        if function not in resources:
            problems.append(f"no function {function}")
            continue
        role = set(refs(resources[function].get("Properties", {}).get("Role", {})))
        statements = []
        for name in role & set(resources):
            for policy in resources[name].get("Properties", {}).get("Policies", []) or []:
                for conditions in choices(template):
                    document = resolve(policy, conditions).get("PolicyDocument", {}) if isinstance(policy, dict) else {}
                    statements += [s for s in document.get("Statement", []) if s.get("Effect") == "Allow"]
        for actions, resource in needs:
            for action in actions:
                if not any(action in ([s["Action"]] if isinstance(s.get("Action"), str) else s.get("Action", []))
                           and resource in set(refs(s.get("Resource"))) for s in statements):
                    problems.append(f"{function}'s role does not allow {action} on {resource}")
    return sorted(set(problems))


def transformed(template):
    """The template as SAM's transform turns it into CloudFormation, offline."""
    template = copy.deepcopy(template)
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource.setdefault("Properties", {})["CodeUri"] = "s3://bucket/key"

    class NoManagedPolicies:
        def load(self):
            return {}

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(template, {"AWS::Region": "us-east-1"}, NoManagedPolicies())


def problems_of(path, out=None):
    """Every broken property of the template at `path`, as written and after
    the transform (written to `out` when given), each a line naming it."""
    with open(path) as file:
        written = yaml_parse(file.read())
    problems = []
    for form, template in (("as written", written), ("after the transform", None)):
        if template is None:
            try:
                template = transformed(written)
            except Exception as error:  # noqa: BLE001 (the transform's own refusal, of any kind, is a finding)
                problems.append(f"transform: {error}")
                continue
            if out:
                with open(out, "w") as file:
                    json.dump(template, file, indent=1)
        problems += [f"only-way-in ({form}): {p}" for p in only_way_in(template)]
        problems += [f"grants ({form}): {p}" for p in grants(template)]
    return sorted(set(problems))


def main():
    args = sys.argv[1:]
    out = args[args.index("--transformed") + 1] if "--transformed" in args else None
    args = [a for a in args if a != "--transformed" and a != out]
    path = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "template.yaml")
    problems = problems_of(path, out)
    for problem in problems:
        print(f"{path}: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"{path}: only the API's authorized routes reach a function; every function may make the calls it needs")


if __name__ == "__main__":
    main()
