"""A cfn-lint rule (make validate loads it with --append-rules): the stack's
one dashboard, with change events on and off, shows the functions' EMF
metrics from MetricsNamespace for every route (requests by route and by
outcome, p50/p99 latency, DynamoDB and KMS time, cold starts), API Gateway's
answers and p50/p99 latency, Lambda throttles, DynamoDB's written capacity
and throttles, the init duration from the REPORT records, every alarm that
exists, and the dead-letter queue's depth exactly when change events do;
every widget titled, in the stack's region, on the 24-column grid."""

import json
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule, RuleMatch

NS = "${MetricsNamespace}"
ROUTES = {"UpdateApiKeyFunction": ("update-api-key", "ApiKeysTable", "UpdateApiKeyLogs"),
          "UpdateMcpServerFunction": ("update-mcp-server", "McpServersTable", "UpdateMcpServerLogs"),
          "UpdateModelFunction": ("update-model", "ModelsTable", "UpdateModelLogs")}
OUTCOMES = ("updated", "invalid", "forbidden", "not_found", "conflict", "unavailable", "error")
API = (("ApiId", "${HttpApi}"),)
DLQ = ("AWS/SQS", "ApproximateNumberOfMessagesVisible", (("QueueName", "${ChangeEventsDeadLetterQueue.QueueName}"),))
CHANGES = "PublishesChangeEvents"


def wanted():
    """(namespace, metric, dimensions, statistic or None) the dashboard must show."""
    lines = [(NS, "KmsLatency", (("Route", "update-api-key"),), None)]
    for function, (route, table, _) in ROUTES.items():
        by_route = (("Route", route),)
        lines += [(NS, "Requests", by_route, None), (NS, "DynamoDbLatency", by_route, None),
                  (NS, "ColdStart", by_route, "Sum"), (NS, "Latency", by_route, "p50"), (NS, "Latency", by_route, "p99")]
        lines += [(NS, "Requests", tuple(sorted(by_route + (("Outcome", o),))), None) for o in OUTCOMES]
        lines += [("AWS/Lambda", "Throttles", (("FunctionName", f"${{{function}}}"),), "Sum"),
                  ("AWS/DynamoDB", "ConsumedWriteCapacityUnits", (("TableName", f"${{{table}}}"),), "Sum"),
                  ("AWS/DynamoDB", "ThrottledRequests", (("Operation", "UpdateItem"), ("TableName", f"${{{table}}}")), "Sum")]
    lines += [("AWS/ApiGateway", m, API, s) for m in ("Latency", "IntegrationLatency") for s in ("p50", "p99")]
    return lines + [("AWS/ApiGateway", m, API, "Sum") for m in ("Count", "4xx", "5xx")]


def text(value, changes):
    """The body's text with change events on or off: Fn::If on CHANGES
    resolved, Fn::Join joined, Fn::Sub strings left as written."""
    if isinstance(value, str):
        return value
    (name, argument), = value.items()
    if name == "Fn::If" and argument[0] == CHANGES:
        return text(argument[1] if changes else argument[2], changes)
    if name == "Fn::Sub" and isinstance(argument, str):
        return argument
    if name == "Fn::Join":
        return argument[0].join(text(part, changes) for part in argument[1])
    raise ValueError(f"cannot read {json.dumps(value)[:80]}")


class Dashboard(CloudFormationLintRule):
    id = "E9101"
    shortdesc = "The dashboard shows every route's metrics and every alarm"
    description = __doc__
    source_url = "docs/operations.md#the-dashboard"
    tags: ClassVar[list[str]] = ["dashboard"]

    def match(self, cfn):
        resources = cfn.template.get("Resources", {})
        dashboard = resources.get("Dashboard", {})
        if dashboard.get("Type") != "AWS::CloudWatch::Dashboard" or "Condition" in dashboard:
            return [RuleMatch(["Resources"], "the stack must always have its Dashboard (AWS::CloudWatch::Dashboard)")]
        path, problems = ["Resources", "Dashboard", "Properties", "DashboardBody"], []
        for changes in (True, False):
            state = f"with PublishChangeEvents={'true' if changes else 'false'}"
            try:
                body = json.loads(text(dashboard.get("Properties", {}).get("DashboardBody"), changes))
                widgets = body["widgets"]
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                problems.append(f"{state}, the body is not a JSON object of widgets: {error}")
                continue
            shown, alarms, queries = set(), set(), []
            if not 1 <= len(widgets) <= 20:
                problems.append(f"{state}, {len(widgets)} widgets; readable at a glance is 20 at most")
            for widget in widgets:
                properties, kind = widget.get("properties", {}), widget.get("type")
                title = properties.get("title")
                if not title:
                    problems.append(f"a {kind} widget has no title")
                if not (isinstance(widget.get("x"), int) and isinstance(widget.get("width"), int)
                        and widget["x"] + widget["width"] <= 24):
                    problems.append(f"widget {title!r} is off the 24-column grid")
                if kind in ("metric", "log") and properties.get("region") != "${AWS::Region}":
                    problems.append(f"widget {title!r} is not in the stack's region")
                if kind == "alarm":
                    alarms.update(properties.get("alarms", []))
                elif kind == "log":
                    queries.append(properties.get("query", ""))
                for line in properties.get("metrics", []) if kind == "metric" else []:
                    options = line[-1] if line and isinstance(line[-1], dict) else {}
                    names = [v for v in line if not isinstance(v, dict)]
                    if len(names) < 2 or len(names) % 2 or not all(isinstance(v, str) for v in names) or "." in names[:2]:
                        problems.append(f"widget {title!r} has a line the rule cannot read (write each metric out)")
                        continue
                    if not names[0].startswith("AWS/") and names[0] != NS:
                        problems.append(f"widget {title!r} reads {names[1]} from {names[0]}, not from MetricsNamespace")
                    shown.add((names[0], names[1], tuple(sorted(zip(names[2::2], names[3::2]))),
                               options.get("stat", properties.get("stat"))))
            for namespace, metric, dimensions, stat in wanted():
                if not any(s[:3] == (namespace, metric, dimensions) and stat in (None, s[3]) for s in shown):
                    problems.append(f"{state}, it does not show {namespace} {metric} {dict(dimensions)} {stat or ''}")
            if any(s[:3] == DLQ for s in shown) != changes:
                problems.append(f"{state}, it must {'' if changes else 'not '}show the dead-letter queue's depth")
            existing = {f"${{{name}.Arn}}" for name, r in resources.items() if r.get("Type") == "AWS::CloudWatch::Alarm"
                        and r.get("Condition") in (None, CHANGES) and (changes or "Condition" not in r)}
            if alarms != existing:
                problems.append(f"{state}, the alarm widget must show every alarm: lacks {sorted(existing - alarms)}, "
                                f"shows others {sorted(alarms - existing)}")
            groups = [f"SOURCE '${{{group}}}'" for _, _, group in ROUTES.values()]
            if not any(all(g in q for g in groups) and "platform.report" in q and "initDurationMs" in q for q in queries):
                problems.append("it does not show the init duration (a log widget over the three functions' groups "
                                "reading the platform.report records' initDurationMs)")
        return [RuleMatch(path, f"Dashboard: {problem}") for problem in dict.fromkeys(problems)]
