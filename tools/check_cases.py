"""Each of the template's checks proved to notice what it is for: every case in
tools/cases/*.yaml edits a copy of template.yaml as the checks read it (its
loops expanded, tools/expand.py; so a case names a resource by its logical id
even where a loop writes it), or of events.schema.json, and names the checks
that must then fail: Guard rules by name,
stack_properties.py's properties, check_events.py ("events"). Run by
`make validate` (check_cases.py CFN_GUARD) with the tools virtualenv's Python.
"""

import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

import check_events
import expand
import stack_properties
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
# stack_properties.py's properties, run only on the cases that name one.
PROPERTIES = {"only-way-in", "grants", "key-policies", "jwt-authorizers", "monitoring", "kept-ids"}
ROOT = os.path.dirname(HERE)


class Tagged:
    """A value under a short-form tag (!Ref, !GetAtt, !Sub, !If...), kept as written."""

    def __init__(self, tag, value):
        self.tag, self.value = tag, value


class Loader(yaml.CSafeLoader):
    pass


def construct(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        return Tagged("!" + suffix, loader.construct_scalar(node))
    kind = "sequence" if isinstance(node, yaml.SequenceNode) else "mapping"
    return Tagged("!" + suffix, getattr(loader, f"construct_{kind}")(node, deep=True))


Loader.add_multi_constructor("!", construct)


def long_form(value):
    """A case's value as the checks read a template (samcli's yaml_parse):
    !Ref X as {"Ref": X}, !GetAtt A.B as {"Fn::GetAtt": [A, B]}, !Sub t as
    {"Fn::Sub": t}..."""
    if isinstance(value, Tagged):
        name = value.tag[1:]
        inner = value.value.split(".", 1) if name == "GetAtt" and isinstance(value.value, str) else value.value
        return {name if name in ("Ref", "Condition") else f"Fn::{name}": long_form(inner)}
    if isinstance(value, dict):
        return {key: long_form(item) for key, item in value.items()}
    return [long_form(item) for item in value] if isinstance(value, list) else value


def edited(documents, edit):
    """The documents with one edit made at edit's path `at` (in the template
    unless `in: schema`): set a value, delete, insert into a list, or
    replace [old, new] in a text (old must be there). A path steps through an
    intrinsic function to its argument, as the short form reads: [..., 1, 1]
    is the second branch of the !If that is the second item."""
    documents = copy.deepcopy(documents)
    *path, key = [edit.get("in", "template"), *edit["at"]]
    parent = documents
    for step in path:
        parent = through(parent, step)[step]
    parent = through(parent, key)
    if "delete" in edit:
        del parent[key]
    elif "insert" in edit:
        parent.insert(key, long_form(edit["insert"]))
    elif "set" in edit:
        parent[key] = long_form(edit["set"])
    else:
        if edit["replace"][0] not in parent[key]:
            raise KeyError(edit["replace"][0])
        parent[key] = parent[key].replace(*edit["replace"])
    return documents


def through(node, step):
    """`node`, or the argument of the intrinsic function it is when `step` is not its name."""
    if isinstance(node, dict) and len(node) == 1 and step not in node:
        (name, argument), = node.items()
        if name in ("Ref", "Condition") or name.startswith("Fn::"):
            return argument
    return node


# tools/expand.py's check, on edits of template.yaml as written (and of samconfig.toml beside it): each
# must be found. A loop writes these resources, so no case above can reach them.
EXPANSION_CASES = [
    ("a loop's identifier in a plain string, which cfn-lint leaves and the SAM CLI substitutes", "template.yaml",
     "        Properties:\n          LogGroupName: !Sub\n", "        Properties:\n          Tags: [{Key: kind, Value: \"plain-${Kind}\"}]\n          LogGroupName: !Sub\n"),
    ("a loop's identifier in a DependsOn, which only the SAM CLI substitutes", "template.yaml",
     "      Update${Kind}Role:\n        Type: AWS::IAM::Role\n",
     "      Update${Kind}Role:\n        Type: AWS::IAM::Role\n        DependsOn: Update${Kind}Logs\n"),
    ("the SAM CLI not told to expand loops", "samconfig.toml", "language_extensions = true", ""),
    ("a mapping misspelt, which cfn-lint's expander lets pass", "template.yaml",
     "- Binary: !FindInMap [Kinds, !Ref Kind, Binary]", "- Binary: !FindInMap [Kind, !Ref Kind, Binary]"),
]


def expansion_cases():
    problems = []
    for case, name, old, new in EXPANSION_CASES:
        with tempfile.TemporaryDirectory() as tmp:
            for copied in ("template.yaml", "samconfig.toml"):
                with open(os.path.join(ROOT, copied)) as file:
                    text = file.read()
                if copied == name:
                    if old not in text:
                        problems.append(f"expansion: cannot make {case!r} ({old!r} is not in {name})")
                    text = text.replace(old, new, 1)
                with open(os.path.join(tmp, copied), "w") as file:
                    file.write(text)
            if not expand.disagreements(os.path.join(tmp, "template.yaml")):
                problems.append(f"expansion: {case!r} is not found")
    return problems


def main():
    guard = sys.argv[1]
    template = expand.load(os.path.join(ROOT, "template.yaml"))
    with open(os.path.join(ROOT, "events.schema.json")) as file:
        schema = json.load(file)
    cases = []
    for path in sorted(glob.glob(os.path.join(HERE, "cases", "*.yaml"))):
        with open(path) as file:
            cases += [dict(case, file=os.path.basename(path)) for case in yaml.load(file, Loader)]
    failed, problems, rules = {}, [], {"events", *PROPERTIES}
    with tempfile.TemporaryDirectory() as tmp:
        for number, case in enumerate(cases):
            documents = {"template": template, "schema": schema}
            try:
                for edit in case.get("edits", [case]):
                    documents = edited(documents, edit)
            except (KeyError, IndexError, TypeError, AttributeError) as error:
                problems.append(f"{case['file']}: cannot make {case['case']!r} ({error!r})")
                continue
            with open(os.path.join(tmp, f"{number:03d}.json"), "w") as file:
                json.dump(documents["template"], file)
            problems_found = check_events.check(documents["template"], documents["schema"])
            failed[number] = {"events"} if problems_found else set()
            # `says`: the events check must fail for this reason, not only for another the edit causes.
            if problems_found and "says" in case and not any(case["says"] in p for p in problems_found):
                failed[number] = {f"events, not saying {case['says']!r}"}
        # One run of each tool for every case.
        out = subprocess.run([guard, "validate", "--rules", os.path.join(HERE, "guard", "rules"), "--data", tmp,
                              "--output-format", "json", "--structured", "--show-summary", "none"],
                             capture_output=True, text=True, check=False)
        for report in json.loads(out.stdout):
            number = int(os.path.basename(report["name"])[:3])
            failed[number] |= {rule["Rule"]["name"] for rule in report["not_compliant"]}
            rules |= {rule["Rule"]["name"] for rule in report["not_compliant"]} | set(report["compliant"])
            failed[number] |= {f"{rule} (skipped)" for rule in report["not_applicable"]}
        for number in [n for n in failed if PROPERTIES & set(cases[n]["fails"])]:
            found = stack_properties.problems_of(os.path.join(tmp, f"{number:03d}.json"))
            failed[number] |= {p for p in PROPERTIES for line in found if line.startswith(f"{p} (")}
    for number, found in failed.items():
        case = cases[number]
        if found != set(case["fails"]):
            problems.append(f"{case['file']}: {case['case']!r} fails {sorted(found) or 'nothing'}, "
                            f"must fail {sorted(case['fails']) or 'nothing'}")
    problems += expansion_cases()
    # Every check has a case it fails (the unedited template, which make validate checks first, passes them all).
    problems += [f"no case fails {rule}" for rule in sorted(rules - {name for c in cases for name in c["fails"]})]
    for problem in problems:
        print(f"cases: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"cases: {len(cases)} edits of template.yaml and events.schema.json, each failing exactly the checks "
          f"it names; each of the {len(rules)} checks fails in one; tools/expand.py finds each of "
          f"{len(EXPANSION_CASES)} edits of the template as written")


if __name__ == "__main__":
    main()
