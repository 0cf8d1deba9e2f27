"""The stack's properties (docs/testing.md), on a template as written (its loops expanded, tools/expand.py)
and after SAM's transform (offline):
only-way-in (a function is reached only through an authorized route of the template's API), grants (each
role allows exactly what its user calls, grants_of below, and only its service may assume it), key-policies (no
key policy lets others than the account's administration use a key unless a condition narrows it) and
jwt-authorizers (every JWT authorizer names an issuer and an audience, under every choice of conditions) and
monitoring (every function, table, pipe, API, queue and rule has its alarms, every alarm is on the dashboard) and
kept-ids (each table and key a function's variable names keeps the logical id the variable spells).

    python tools/stack_properties.py [TEMPLATE] [--expanded OUT.json] [--transformed OUT.json]
    # exit 1 naming each broken property
"""

import copy
import fnmatch
import itertools
import json
import logging
import os
import re
import sys

from samtranslator.translator.transform import transform

import expand
import kinds
from kinds import refs

# The transform counts metrics it never publishes offline, and says so on exit.
logging.getLogger("samtranslator.metrics").setLevel(logging.ERROR)

# What each role's user calls, on which resource: every grant present, and none
# beyond them (X-Ray's, which take no resource, aside). Which resources, the
# template says (a function's table, log group, kept outcomes and key through
# its environment and logging; a pipe's stream, table key, bus and dead-letter
# queue through its properties); which KMS calls a function makes, the code
# says (tools/kinds.py: tools/resources.json, written from the record kinds' declarations).
TABLE = ["dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:DescribeTable"]
# A keyed update's outcome: read with the record, kept in its transaction, each function's own only.
KEPT_ACTIONS = ["dynamodb:BatchGetItem", "dynamodb:PutItem"]
KEPT_VARIABLE = "IDEMPOTENCY_TABLE"
SECRETS_VARIABLE = "SECRETS_KEY_ID"
LOGS = ["logs:CreateLogStream", "logs:PutLogEvents"]
STREAM = ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"]
XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


def one_ref(value, resources):
    """The one resource of the template `value` refers to (a Ref, a GetAtt, either branch of an If), else None."""
    found = set(refs(value)) & set(resources)
    return found.pop() if len(found) == 1 else None


def function_needs(resource, template):
    """A function's grants: its kind's table, kept outcomes, log group and KMS calls, named by the template."""
    resources, props = template.get("Resources", {}), resource.get("Properties", {})
    kind = kinds.kind_of_function(resource)
    if kind is None:
        return None
    env = kinds.environment(template, resource)
    needs = [(TABLE, one_ref(env.get(kind["table_variable"]), resources)),
             (KEPT_ACTIONS, one_ref(env.get(KEPT_VARIABLE), resources)),
             (LOGS, one_ref(props.get("LoggingConfig", {}).get("LogGroup"), resources))]
    if kind["kms"]:
        needs.append((kind["kms"], one_ref(env.get(SECRETS_VARIABLE), resources)))
    return needs


def pipe_needs(resource, resources):
    """A pipe's grants: its stream (and so its table's key, through DynamoDB), its bus, its dead-letter queue."""
    props = resource.get("Properties", {})
    table = one_ref(props.get("Source"), resources)
    key = one_ref(resources.get(table, {}).get("Properties", {}).get("SSESpecification", {}).get("KMSMasterKeyId"),
                  resources)
    queue = props.get("SourceParameters", {}).get("DynamoDBStreamParameters", {}).get("DeadLetterConfig", {})
    return [(STREAM, table), (["kms:Decrypt"], key), (["events:PutEvents"], one_ref(props.get("Target"), resources)),
            (["sqs:SendMessage"], one_ref(queue.get("Arn"), resources))]


def grants_of(template):
    """Each role user's grants: every function the code declares, every pipe."""
    resources = template.get("Resources", {})
    found = {}
    for name, resource in resources.items():
        if resource.get("Type") in FUNCTION_TYPES:
            needs = function_needs(resource, template)
            if needs is not None:
                found[name] = needs
        elif resource.get("Type") == "AWS::Pipes::Pipe":
            found[name] = pipe_needs(resource, resources)
    return found
# Who may assume a role, by the type of its user.
ASSUMED_BY = {"AWS::Serverless::Function": "lambda.amazonaws.com", "AWS::Lambda::Function": "lambda.amazonaws.com",
              "AWS::Pipes::Pipe": "pipes.amazonaws.com"}
FUNCTION_TYPES = ("AWS::Lambda::Function", "AWS::Serverless::Function")
API_TYPES = ("AWS::ApiGatewayV2::Api", "AWS::Serverless::HttpApi")
# What may refer to a function besides its API and its permissions: it reads, never invokes.
MONITORING = ("AWS::CloudWatch::", "AWS::Logs::", "AWS::IAM::Role")
OPERATIONS = ("get", "put", "post", "delete", "patch", "head", "options", "trace", "x-amazon-apigateway-any-method")


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


def conditions_in(value):
    """The names of the conditions `value`'s Fn::Ifs choose by."""
    if isinstance(value, dict):
        own = {value["Fn::If"][0]} if set(value) == {"Fn::If"} else set()
        return own.union(*map(conditions_in, value.values()))
    return set().union(*map(conditions_in, value)) if isinstance(value, list) else set()


def variants(value):
    """`value` under every assignment of the conditions it names (each free: a
    check cannot know the parameters)."""
    names = sorted(conditions_in(value))
    for values in itertools.product([True, False], repeat=len(names)):
        yield resolve(value, dict(zip(names, values)))


def authorized_routes(props):
    """(method, path) of every route in an API's body, and the problems with them:
    a route without security, or with a scheme that is not IAM or a JWT authorizer."""
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
    allowed = {name: set() for name in apis}
    for name, api in apis.items():
        for props in variants(api.get("Properties", {})):
            routes, broken = authorized_routes(props)
            problems += [f"API {name}: {p}" for p in broken]
            allowed[name] |= routes
    for name, r in resources.items():
        kind = r.get("Type", "")
        for props in variants(r.get("Properties", {})):
            targets = functions & set(refs(props))
            if kind == "AWS::ApiGatewayV2::Route" and props.get("AuthorizationType", "NONE") == "NONE":
                problems.append(f"route {name} ({props.get('RouteKey')}) without authorization")
            if name in functions:
                problems += function_problems(name, props, apis, allowed)
            elif not targets or kind in API_TYPES or kind.startswith(MONITORING):
                continue
            elif kind == "AWS::Lambda::Permission":
                problems += permission_problems(name, props, apis, allowed)
            else:
                problems.append(f"{kind} {name} reaches {', '.join(sorted(targets))} other than through the API")
    return sorted(set(problems))


def function_problems(name, props, apis, allowed):
    """A function is reached by no URL, and by no event but authorized routes of the template's APIs."""
    problems = [f"function {name} has a function URL"] if "FunctionUrlConfig" in props else []
    for event_name, event in (props.get("Events") or {}).items():
        api = (event.get("Properties") or {}).get("ApiId", {})
        if event.get("Type") != "HttpApi" or not isinstance(api, dict) or api.get("Ref") not in apis:
            problems.append(f"function {name}: event {event_name} ({event.get('Type')}) is not a route of the API")
        elif (str(event["Properties"].get("Method", "")).upper(), event["Properties"].get("Path", "")) \
                not in allowed[api["Ref"]]:
            problems.append(f"function {name}: event {event_name} is not an authorized route of {api['Ref']}")
    return problems


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


def own_keys(function):
    """The condition that holds a function to its own items of the kept outcomes: those whose key
    starts with its binary's name (shared/src/request/idempotency.rs, kept_key)."""
    binary = function.get("Metadata", {}).get("BuildProperties", {}).get("Binary")
    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{binary}#*"]}}


def own_context(kind):
    """The condition that holds a function's use of the secrets key to the secrets of one record of its
    kind: the context's field one of the kind's sealed fields, its keys exactly the code's (seal::context,
    through tools/resources.json), each key but field present (ForAllValues alone passes an empty one)."""
    context = kind.get("kms_context") or {"fields": [], "keys": []}
    return {"StringEquals": {"kms:EncryptionContext:field": context["fields"]},
            "ForAllValues:StringEquals": {"kms:EncryptionContextKeys": context["keys"]},
            "Null": {f"kms:EncryptionContext:{key}": "false" for key in context["keys"] if key != "field"}}


def normal(condition):
    """A condition as IAM reads it: a key's values as a set (one value or a list of one alike),
    booleans as their text."""
    if isinstance(condition, dict):
        return {key: normal(value) for key, value in condition.items()}
    values = condition if isinstance(condition, list) else [condition]
    return sorted(json.dumps(str(value).lower() if isinstance(value, bool) else value, sort_keys=True)
                  for value in values)


def listed(value):
    return [value] if isinstance(value, str) else list(value or [])


def grants(template):
    problems = []
    resources = template.get("Resources", {})
    # A role's policies are its own, in it or beside it (an AWS::IAM::RolePolicy of that role alone).
    problems += [f"{name} attaches a policy from outside its role" for name, r in resources.items()
                 if r.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")]
    # Beside a role, a policy exists whenever the role does (no condition of its own), under a name
    # of its own (IAM keeps one policy per name: the one written last would replace the other), and
    # the role's user waits for it (DependsOn), so it never runs without it.
    beside = {}
    for name, r in resources.items():
        if r.get("Type") == "AWS::IAM::RolePolicy":
            role = one_ref(r.get("Properties", {}).get("RoleName"), resources)
            if role is None or resources[role].get("Type") != "AWS::IAM::Role":
                problems.append(f"{name} attaches a policy to no one role of the template")
                continue
            if r.get("Condition"):
                problems.append(f"{name} exists only where {r['Condition']} holds, and {role} without it")
            beside.setdefault(role, []).append((name, r.get("Properties", {})))
    for role, policies in beside.items():
        names = [p.get("PolicyName") for policy in resources[role].get("Properties", {}).get("Policies", []) or []
                 for p in variants(policy) if isinstance(p, dict)]
        names += [props.get("PolicyName") for _, props in policies]
        problems += [f"{role} has two policies named {n}: the one written last replaces the other"
                     for n in sorted(set(n for n in names if names.count(n) > 1))]
    declared = {kind["function"] for kind in kinds.KINDS}
    built = {r.get("Metadata", {}).get("BuildProperties", {}).get("Binary") for r in resources.values()
             if r.get("Type") in FUNCTION_TYPES}
    problems += [f"no function in the template builds {binary}, which the code declares" for binary in declared - built]
    for user, needs in grants_of(template).items():
        missing = [actions for actions, resource in needs if resource is None]
        if missing:
            problems.append(f"{user}: the template names no one resource it needs {missing[0][0]} on")
            continue
        props = resources[user].get("Properties", {})
        roles = set(refs(props.get("Role") or props.get("RoleArn") or {})) & set(resources)
        if len(roles) != 1:
            problems.append(f"{user} has no role of its own in the template")
            continue
        role_name = roles.pop()
        role = resources[role_name].get("Properties", {})
        if role.get("ManagedPolicyArns") or role.get("PermissionsBoundary"):
            problems.append(f"{user}'s role has managed policies")
        trust = [s for s in role.get("AssumeRolePolicyDocument", {}).get("Statement", [])]
        if [listed(s.get("Principal", {}).get("Service")) for s in trust] != [[ASSUMED_BY[resources[user]["Type"]]]]:
            problems.append(f"{user}'s role may be assumed by others than {ASSUMED_BY[resources[user]['Type']]}")
        statements, kind = [], kinds.kind_of_function(resources[user])
        problems += [f"{user} may run before {name}, beside its role (no DependsOn)"
                     for name, _ in beside.get(role_name, []) if name not in listed(resources[user].get("DependsOn"))]
        for policy in (role.get("Policies", []) or []) + [props for _, props in beside.get(role_name, [])]:
            for variant in variants(policy):
                statements += (variant.get("PolicyDocument", {}) if isinstance(variant, dict) else {}).get("Statement", [])
        for s in statements:
            if set(s) & {"NotAction", "NotResource", "Principal"}:
                problems.append(f"{user}'s role has a statement with {sorted(set(s) & {'NotAction', 'NotResource'})}")
            if s.get("Effect") != "Allow":
                continue
            on = set(refs(s.get("Resource")))
            kept = [resource for actions, resource in needs if actions is KEPT_ACTIONS]
            if kept and kept[0] in on and own_keys(resources[user]) != s.get("Condition"):
                problems.append(f"{user}'s role reaches {kept[0]} beyond its own items")
            called = listed(s.get("Action"))
            uses_key = [a for a in called if a != "kms:DescribeKey" and kind and a in kind["kms"]]
            if uses_key and "kms:DescribeKey" in called:
                problems.append(f"{user}'s role allows kms:DescribeKey under a record's encryption context, "
                                f"which DescribeKey never has: a statement of its own")
            if uses_key and normal(own_context(kind)) != normal(s.get("Condition")):
                problems.append(f"{user}'s role may call {uses_key[0]} outside the encryption context of one "
                                f"record's secret: {json.dumps(s.get('Condition'))}, not {json.dumps(own_context(kind))}")
            for action in called:
                allowed = (action in XRAY and listed(s.get("Resource")) == ["*"]) or any(
                    action in actions and on == {resource} for actions, resource in needs)
                if not allowed:
                    problems.append(f"{user}'s role allows {action} on {s.get('Resource')}, which it does not need")
        for actions, resource in needs:
            for action in actions:
                if not any(s.get("Effect") == "Allow" and action in listed(s.get("Action"))
                           and resource in set(refs(s.get("Resource"))) for s in statements):
                    problems.append(f"{user}'s role does not allow {action} on {resource}")
    return sorted(set(problems))


# Every field a record kind seals (tools/resources.json): the only fields an encryption context names.
SEALED_FIELDS = {field for kind in kinds.KINDS for field in (kind.get("kms_context") or {}).get("fields", [])}
# The calls that use a key's material: opening data, making data keys, sealing again under another key.
KEY_USE = ("kms:Decrypt", "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:GenerateDataKeyPair",
           "kms:GenerateDataKeyPairWithoutPlaintext", "kms:ReEncryptFrom", "kms:ReEncryptTo")
# The account's administration: its root, through which IAM policies of the account grant a key's use.
ADMINISTRATION = re.compile(r"(arn:(\$\{AWS::Partition\}|aws[a-z-]*):iam::)?\$\{AWS::AccountId\}(:root)?")
# A condition that narrows a statement open to others: the service the request comes through, principals named
# by ARN, an encryption context; tested for a value. ...IfExists and negated operators pass a request without the
# key (or with another value), ForAllValues one with none, a value of wildcards alone any: none of them narrows.
NARROWING_KEY = re.compile(r"kms:ViaService|aws:PrincipalArn|kms:EncryptionContext:.+", re.IGNORECASE)
NARROWING_TEST = re.compile(r"(ForAnyValue:)?(StringEquals|StringEqualsIgnoreCase|StringLike|ArnEquals|ArnLike)",
                            re.IGNORECASE)


def as_text(value):
    """A principal as Sub would write it (Ref X as ${X}, GetAtt X.A as ${X.A}), or None if it is no text."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (key, inner), = value.items()
        if key == "Ref" and isinstance(inner, str):
            return "${" + inner + "}"
        if key == "Fn::GetAtt":
            return "${" + (".".join(inner) if isinstance(inner, list) else str(inner)) + "}"
        if key == "Fn::Sub":
            return inner[0] if isinstance(inner, list) else inner
        if key == "Fn::Join" and isinstance(inner, list) and len(inner) == 2 and isinstance(inner[1], list):
            parts = [as_text(part) for part in inner[1]]
            return None if None in parts else str(inner[0]).join(parts)
    return None


def others(principal, resources):
    """The principals a key-policy statement's Principal names beside the account's administration and the
    template's own roles and users (each named by its ARN)."""
    if not isinstance(principal, dict) or any(key == "Ref" or key.startswith("Fn::") for key in principal):
        principal = {"AWS": principal}
    found = []
    for kind, values in principal.items():
        for value in values if isinstance(values, list) else [values]:
            text = as_text(value)
            own = re.fullmatch(r"\$\{([A-Za-z0-9]+)\.Arn\}", text or "")
            if kind == "AWS" and text is not None and (ADMINISTRATION.fullmatch(text) or own and resources.get(
                    own.group(1), {}).get("Type") in ("AWS::IAM::Role", "AWS::IAM::User")):
                continue
            found.append(f"{kind}: {text if text is not None else json.dumps(value)}")
    return found


def narrowed(condition):
    """Whether a statement's condition narrows it to a service, named principals or an encryption context."""
    for test, pairs in (condition or {}).items():
        if not NARROWING_TEST.fullmatch(test) or not isinstance(pairs, dict):
            continue
        for key, values in pairs.items():
            values = values if isinstance(values, list) else [values]
            if NARROWING_KEY.fullmatch(key) and values and not any(
                    isinstance(v, str) and re.fullmatch(r"[*?]*", v) for v in values):
                return True
    return False


def key_policies(template):
    """No key policy lets a principal beside the account's administration (and the template's own roles, each
    named) decrypt, make data keys or re-encrypt with a key, but under a condition that narrows it, and an
    encryption context it names is one of a field a record kind seals."""
    problems = []
    resources = template.get("Resources", {})
    for name, r in resources.items():
        if r.get("Type") != "AWS::KMS::Key":
            continue
        policy = (r.get("Properties") or {}).get("KeyPolicy") or {}
        written = policy.get("Statement", []) if isinstance(policy, dict) else []
        for number, statement in enumerate(written if isinstance(written, list) else [written]):
            for s in variants(statement):
                if not isinstance(s, dict) or s.get("Effect") != "Allow":
                    continue
                if "NotAction" in s:
                    patterns = [p.lower() for p in listed(s["NotAction"]) if isinstance(p, str)]
                    uses = [a for a in KEY_USE if not any(fnmatch.fnmatchcase(a.lower(), p) for p in patterns)]
                    actions = [f"all but {', '.join(listed(s['NotAction']))}"] if uses else []
                else:
                    actions = [a for a in listed(s.get("Action")) if not isinstance(a, str) or any(
                        fnmatch.fnmatchcase(use.lower(), a.lower()) for use in KEY_USE)]
                who = others(s["Principal"], resources) if "Principal" in s else []
                who += [f"all but {json.dumps(s['NotPrincipal'])}"] if "NotPrincipal" in s else []
                if actions and who and not narrowed(s.get("Condition")):
                    problems.append(f"key {name}: Statement[{number}] lets {'; '.join(who)} use it "
                                    f"({', '.join(map(str, actions))}) under no condition naming a service "
                                    "(kms:ViaService), principals (aws:PrincipalArn) or an encryption context")
                # A context's field names a sealed field of a record kind (the code's list), nothing else,
                # under any operator and in any case of the key (IAM reads condition keys so): only
                # StringEquals names a field exactly.
                named = [(operator, value) for operator, tests in (s.get("Condition") or {}).items()
                         if isinstance(tests, dict) for key, value in tests.items()
                         if key.lower() == "kms:encryptioncontext:field"]
                unsealed = [f for operator, value in named for f in listed(value)
                            if operator != "StringEquals" or f not in SEALED_FIELDS]
                if actions and who and unsealed:
                    problems.append(f"key {name}: Statement[{number}] lets {'; '.join(who)} open {unsealed}, "
                                    f"not by StringEquals one of the fields a record kind seals "
                                    f"({sorted(SEALED_FIELDS)})")
    return sorted(set(problems))


def mappings(value, chosen=(), at=()):
    """Every mapping in `value`, with the choices of conditions (name, bool) that lead to it and its keys."""
    if isinstance(value, dict):
        if set(value) == {"Fn::If"} and isinstance(value["Fn::If"], list) and len(value["Fn::If"]) == 3:
            name, yes, no = value["Fn::If"]
            yield from mappings(yes, (*chosen, (name, True)), at)
            yield from mappings(no, (*chosen, (name, False)), at)
            return
        yield value, chosen, at
        for key, inner in value.items():
            yield from mappings(inner, chosen, (*at, key))
    elif isinstance(value, list):
        for inner in value:
            yield from mappings(inner, chosen, at)


def non_empty(parameter):
    """The ways a template states that a parameter is not empty (an empty list parameter is [""])."""
    ref = {"Ref": parameter}
    return [{"Fn::Not": [{"Fn::Equals": [ref, ""]}]}, {"Fn::Not": [{"Fn::Equals": ["", ref]}]},
            {"Fn::Not": [{"Fn::Contains": [ref, ""]}]},
            {"Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", ref]}, ""]}]}]


def facts(on, conditions):
    """What holds where the conditions `on` do: each one's definition (or its negation), and each member of a
    definition that is an And (or, negated, an Or), a member naming a condition read as its definition."""
    found, pending = [], [conditions.get(name) if choice else {"Fn::Not": [conditions.get(name)]}
                          for name, choice in on.items()]
    while pending:
        fact = pending.pop()
        if isinstance(fact, dict) and set(fact) == {"Condition"}:
            fact = conditions.get(fact["Condition"])
        negated = isinstance(fact, dict) and set(fact) == {"Fn::Not"} and isinstance(fact["Fn::Not"], list)
        inner = fact["Fn::Not"][0] if negated and fact["Fn::Not"] else None
        if isinstance(inner, dict) and set(inner) == {"Condition"}:
            pending.append({"Fn::Not": [conditions.get(inner["Condition"])]})
        elif fact not in found:
            found.append(fact)
            if isinstance(fact, dict) and set(fact) == {"Fn::And"}:
                pending += fact["Fn::And"]
            elif isinstance(inner, dict) and set(inner) == {"Fn::Or"}:
                pending += [{"Fn::Not": [member]} for member in inner["Fn::Or"]]
    return found


def kept_non_empty(parameter, on, template):
    """Whether `parameter` cannot be empty where the conditions `on` hold: by its own constraints, by a
    condition that holds only if it is not, or by a rule whose assertion says so and whose condition holds."""
    declared = template.get("Parameters", {}).get(parameter)
    if not isinstance(declared, dict):
        return True  # a resource or a pseudo parameter
    if declared.get("AllowedValues") and "" not in [str(v) for v in declared["AllowedValues"]]:
        return True
    if declared.get("Type") == "String":
        try:
            if int(declared.get("MinLength", 0)) > 0 or (
                    "AllowedPattern" in declared and not re.fullmatch(declared["AllowedPattern"], "")):
                return True
        except (re.error, ValueError, TypeError):
            pass
    tests = non_empty(parameter)
    holding = facts(on, template.get("Conditions") or {})
    if any(c in tests for c in holding):
        return True
    return any(rule.get("Assertions") and (rule.get("RuleCondition") is None or rule["RuleCondition"] in holding)
               and any(a.get("Assert") in tests for a in rule["Assertions"] if isinstance(a, dict))
               for rule in (template.get("Rules") or {}).values() if isinstance(rule, dict))


def named(value, on, template):
    """Why `value`, an issuer or an audience, may be empty where `on` holds, or None if it cannot be."""
    if value is None:
        return "is missing"
    if isinstance(value, str):
        return None if value.strip() else "is empty"
    if isinstance(value, list):
        return "is an empty list" if not value else next(filter(None, (named(v, on, template) for v in value)), None)
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return None if kept_non_empty(value["Ref"], on, template) else (
            f"is the parameter {value['Ref']}, which no condition, rule or constraint keeps from being empty here")
    if isinstance(value, dict) and set(value) == {"Fn::Sub"}:
        text = str(as_text(value))
        parts = re.findall(r"\$\{([^}!.]+)\}", text)
        if re.sub(r"\$\{[^}]*\}", "", text).strip() or any(kept_non_empty(p, on, template) for p in parts):
            return None
        return f"is {text}, which no condition, rule or constraint keeps from being empty here"
    return None


def jwt_authorizers(template):
    """Every JWT authorizer (SAM's Auth, an OpenAPI body's, AWS::ApiGatewayV2::Authorizer) names an issuer and
    at least one audience under every choice of the conditions it exists under and names."""
    problems = []
    kinds = (*API_TYPES, "AWS::ApiGatewayV2::Authorizer")
    for name, r in template.get("Resources", {}).items():
        if r.get("Type") not in kinds:
            continue
        for node, chosen, at in mappings(r.get("Properties") or {}):
            openapi = at[-1:] == ("x-amazon-apigateway-authorizer",) and str(node.get("type")).lower() == "jwt"
            if not (openapi or "JwtConfiguration" in node or node.get("AuthorizerType") == "JWT"):
                continue
            config = node.get("jwtConfiguration", node.get("JwtConfiguration"))
            given = dict(chosen)
            names = sorted(conditions_in(config) - set(given))
            for values in itertools.product([True, False], repeat=len(names)):
                on = {**given, **dict(zip(names, values))}
                resolved = resolve(config, on)
                resolved = {k.lower(): v for k, v in resolved.items()} if isinstance(resolved, dict) else {}
                where = " ".join([name, ".".join(map(str, at[:-1] if openapi else at))]).strip() + (
                    f" (where {', '.join(c if v else 'not ' + c for c, v in on.items())})" if on else "")
                for part in ("issuer", "audience"):
                    why = named(resolved.get(part), on, template)
                    if why:
                        problems.append(f"JWT authorizer {where}: its {part} {why}")
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


# What each resource that can fail alone is watched by: an alarm on this metric of it, under exactly
# these dimensions (a metric is published per its full set: an alarm missing one watches nothing).
FUNCTION_ALARMS = [("AWS/Lambda", m, {"FunctionName"}) for m in ("Errors", "Throttles", "Duration")]
API_ALARMS = [("AWS/ApiGateway", "5xx", {"ApiId"})]
WATCHED = {"AWS::Serverless::Function": FUNCTION_ALARMS, "AWS::Lambda::Function": FUNCTION_ALARMS,
           "AWS::DynamoDB::Table": [("AWS/DynamoDB", m, {"TableName", "Operation"})
                                    for m in ("ThrottledRequests", "SystemErrors")],
           "AWS::Pipes::Pipe": [("AWS/EventBridge/Pipes", "ExecutionFailed", {"PipeName"})],
           "AWS::Serverless::HttpApi": API_ALARMS, "AWS::ApiGatewayV2::Api": API_ALARMS,
           "AWS::SQS::Queue": [("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName"})],
           "AWS::Events::Rule": [("AWS/Events", "FailedInvocations", {"EventBusName", "RuleName"})]}


def monitoring(template):
    """Every function, table, pipe, API, queue and rule has its alarms, and every alarm is on the dashboard."""
    resources, watched = template.get("Resources", {}), set()
    alarms = [name for name, r in resources.items() if r.get("Type") == "AWS::CloudWatch::Alarm"]
    for name in alarms:
        props = resources[name].get("Properties", {})
        metrics = [props] + [m.get("MetricStat", {}).get("Metric", {}) for m in props.get("Metrics", [])]
        for metric in metrics:
            dimensions = metric.get("Dimensions", []) or []
            names = frozenset(d.get("Name") for d in dimensions)
            for dimension in dimensions:
                watched.add((metric.get("Namespace"), metric.get("MetricName"),
                             one_ref(dimension.get("Value"), resources), names))
    problems = [f"{name} has no alarm on its {namespace} {metric} (by {', '.join(sorted(dims))})"
                for name, r in resources.items() for namespace, metric, dims in WATCHED.get(r.get("Type"), [])
                if (namespace, metric, name, frozenset(dims)) not in watched]
    shown = set()
    for name, r in resources.items():
        if r.get("Type") == "AWS::CloudWatch::Dashboard":
            shown |= set(refs(r.get("Properties", {}).get("DashboardBody")))
    return problems + [f"{name} is on no dashboard" for name in alarms if name not in shown]


def camel(variable):
    """API_KEYS_TABLE as a logical id: ApiKeysTable."""
    return "".join(word.capitalize() for word in variable.lower().split("_"))


def kept_ids(template):
    """What holds records and secrets keeps its logical id, which a renamed kind would change (a new,
    empty table, the old one left behind): each table or key a function's variable names has the id
    the variable spells (API_KEYS_TABLE: ApiKeysTable, SECRETS_KEY_ID: SecretsKey)."""
    resources, problems = template.get("Resources", {}), []
    for name, resource in resources.items():
        kind = kinds.kind_of_function(resource) if resource.get("Type") in FUNCTION_TYPES else None
        if kind is None:
            continue
        env = kinds.environment(template, resource)
        for variable in (kind["table_variable"], KEPT_VARIABLE, SECRETS_VARIABLE):
            target = one_ref(env.get(variable), resources)
            expected = camel(variable.removesuffix("_ID"))
            if variable in env and target != expected:
                problems.append(f"{name}'s {variable} names {target}, not {expected}")
    return problems


def problems_of(path, out=None, expanded_out=None):
    """Every broken property of the template at `path`, as written (its loops expanded: written to
    `expanded_out` when given) and after the transform (written to `out` when given), each a line naming it."""
    try:
        written = expand.load(path)
    except ValueError as error:
        return [f"expand: {error}"]
    if expanded_out:
        with open(expanded_out, "w") as file:
            json.dump(written, file, indent=1)
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
        problems += [f"key-policies ({form}): {p}" for p in key_policies(template)]
        problems += [f"jwt-authorizers ({form}): {p}" for p in jwt_authorizers(template)]
        problems += [f"monitoring ({form}): {p}" for p in monitoring(template)]
        problems += [f"kept-ids ({form}): {p}" for p in kept_ids(template)]
    return sorted(set(problems))


def main():
    args = sys.argv[1:]
    outs = {flag: args[args.index(flag) + 1] if flag in args else None for flag in ("--transformed", "--expanded")}
    args = [a for a in args if a not in outs and a not in outs.values()]
    path = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "template.yaml")
    problems = problems_of(path, outs["--transformed"], outs["--expanded"])
    for problem in problems:
        print(f"{path}: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"{path}: only the API's authorized routes reach a function; every role allows exactly what its user calls; "
          "no key policy lets others use a key unnarrowed; every JWT authorizer names an issuer and an audience; "
          "every function, table, pipe, API, queue and rule has its alarms, each on the dashboard; "
          "each table and key keeps the logical id its variable spells")


if __name__ == "__main__":
    main()
