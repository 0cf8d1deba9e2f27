"""Checks what cfn-lint and `sam validate` cannot: translates template.yaml
with the SAM translator, once in IAM mode (the default) and once with a JWT
issuer, and asserts that every route is integrated with its own function
and requires authorization, and that each function may call only
dynamodb:UpdateItem, only on its own table.

Run with the tools virtualenv's Python: `make validate` does.
"""

import json
import os
import sys

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

ROUTES = {
    "/api/agent-server/api-keys/{id}": ("UpdateApiKeyFunction", "ApiKeysTable"),
    "/api/agent-server/mcp-servers/{id}": ("UpdateMcpServerFunction", "McpServersTable"),
    "/api/agent-server/models/{id}": ("UpdateModelFunction", "ModelsTable"),
}


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


def check(mode, template_text, use_jwt):
    # The translator needs an S3 CodeUri; `sam build` supplies one on deploy.
    template = yaml_parse(template_text.replace("CodeUri: .", "CodeUri: s3://bucket/code.zip"))
    resources = transform(template, {}, NoManagedPolicies())["Resources"]
    problems = []
    apis = [r for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::Api"]
    if len(apis) != 1:
        return [f"{mode}: expected one HTTP API, found {len(apis)}"]
    body = resolve_if(apis[0]["Properties"]["Body"], {"UseJwt": use_jwt})
    schemes = body.get("components", {}).get("securitySchemes", {})
    operations = {(path, method): op for path, ops in body["paths"].items() for method, op in ops.items()}
    if set(operations) != {(path, "put") for path in ROUTES}:
        problems.append(f"{mode}: routes are {sorted(operations)}, expected PUT on {sorted(ROUTES)}")
    for (path, method), op in operations.items():
        security = op.get("security") or []
        names = [name for requirement in security for name in requirement]
        expected = "JwtAuthorizer" if use_jwt else "AWS_IAM"
        if names != [expected] or expected not in schemes:
            problems.append(f"{mode}: {method.upper()} {path} requires {names}, expected [{expected}]")
        integration = json.dumps(op.get("x-amazon-apigateway-integration", {}))
        function = ROUTES.get(path, ("?", "?"))[0]
        if f"{function}.Arn" not in integration:
            problems.append(f"{mode}: {path} is not integrated with {function}")
        if op.get("x-amazon-apigateway-integration", {}).get("payloadFormatVersion") != "2.0":
            problems.append(f"{mode}: {path} does not use payload format 2.0")
    if use_jwt:
        jwt = schemes.get("JwtAuthorizer", {}).get("x-amazon-apigateway-authorizer", {})
        if jwt.get("type") != "jwt" or "issuer" not in jwt.get("jwtConfiguration", {}):
            problems.append(f"{mode}: JwtAuthorizer is not a JWT authorizer with an issuer")
    for path, (function, table) in ROUTES.items():
        role = resources.get(f"{function}Role", {}).get("Properties", {})
        managed = role.get("ManagedPolicyArns", [])
        basic = [arn for arn in managed if "AWSLambdaBasicExecutionRole" in json.dumps(arn)]
        if len(managed) != len(basic):
            problems.append(f"{mode}: {function} has managed policies beyond basic execution: {managed}")
        statements = [s for policy in role.get("Policies", []) for s in policy["PolicyDocument"]["Statement"]]
        expected = [{"Effect": "Allow", "Action": "dynamodb:UpdateItem", "Resource": {"Fn::GetAtt": [table, "Arn"]}}]
        if statements != expected:
            problems.append(f"{mode}: {function} may do {json.dumps(statements)}, expected only UpdateItem on {table}")
    return problems


def main():
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    text = open(sys.argv[1] if len(sys.argv) > 1 else "template.yaml").read()
    problems = check("IAM mode", text, use_jwt=False) + check("JWT mode", text, use_jwt=True)
    for problem in problems:
        print(f"template check: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print("template check: every route needs IAM (default) or JWT authorization; each function may only UpdateItem its own table")


if __name__ == "__main__":
    main()
