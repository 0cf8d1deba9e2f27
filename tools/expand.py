"""A template as the checks read it: parsed as the SAM CLI parses it, with its `Fn::ForEach` loops
(the AWS::LanguageExtensions transform) expanded by cfn-lint's own expander, which substitutes the
loop's identifier and resolves its `Fn::FindInMap`s but keeps every parameter and `Fn::If`, so the
checks still hold every variant. The Guard rules and Control Tower's controls read resources by type
and see none inside a loop: they get this form (stack_properties.py --expanded), never the file as
written. Run as a script, it checks that the SAM CLI's own expansion (sam build's) agrees:

    python tools/expand.py [TEMPLATE]   # exit 1 naming each disagreement
"""

import copy
import json
import pathlib
import re
import sys
import tomllib

from cfnlint.template import Template
from cfnlint.template.transforms._language_extensions import language_extension
from samcli.yamlhelper import yaml_parse

LANGUAGE_EXTENSIONS = "AWS::LanguageExtensions"


def expanded(template):
    """`template` (a parsed template) with its loops expanded and the transform that runs them
    dropped from `Transform`; raises ValueError naming what cfn-lint refused."""
    template = copy.deepcopy(template)
    transforms = template.get("Transform", [])
    transforms = transforms if isinstance(transforms, list) else [transforms]
    if LANGUAGE_EXTENSIONS not in transforms:
        return template
    matches, result = language_extension(Template("template.yaml", copy.deepcopy(template), ["us-east-1"]))
    if matches:
        raise ValueError("; ".join(match.message for match in matches))
    # cfn-lint's reading of a template reorders each condition's Fn::Equals: only sections that held a
    # loop are taken from its expansion.
    template = {key: substituted(result[key]) if has_loop(value) else value for key, value in template.items()}
    # A mapping only loops read is resolved by the expansion, and left unread (cfn-lint's W7001).
    for name in [name for name in template.get("Mappings", {}) if name not in mappings_read(template)]:
        del template["Mappings"][name]
    if "Mappings" in template and not template["Mappings"]:
        del template["Mappings"]
    rest = [name for name in transforms if name != LANGUAGE_EXTENSIONS]
    if rest:
        template["Transform"] = rest if len(rest) > 1 else rest[0]
    else:
        del template["Transform"]
    return template


def substituted(value):
    """`value` with each Fn::Sub's variables that the expansion made plain text put in its text, as
    CloudFormation would: {"Fn::Sub": ["${Binary}#*", {"Binary": "update-model"}]} is "update-model#*",
    and a Sub left with ${AWS::StackName} or a resource's keeps that."""
    if isinstance(value, list):
        return [substituted(inner) for inner in value]
    if not isinstance(value, dict):
        return value
    value = {key: substituted(inner) for key, inner in value.items()}
    sub = value.get("Fn::Sub")
    if len(value) == 1 and isinstance(sub, list) and len(sub) == 2 and isinstance(sub[0], str):
        text, variables = sub
        plain = {name: inner for name, inner in variables.items() if isinstance(inner, str)}
        text = re.sub(r"\$\{([^}!]+)\}", lambda m: plain.get(m.group(1), m.group(0)), text)
        rest = {name: inner for name, inner in variables.items() if name not in plain}
        if rest:
            return {"Fn::Sub": [text, rest]}
        return {"Fn::Sub": text} if re.search(r"\$\{[^}!]+\}", text) else text
    return value


def has_loop(value):
    return next(loop_identifiers(value), None) is not None


def mappings_read(value):
    """The names of the mappings `value`'s Fn::FindInMaps read."""
    if isinstance(value, dict):
        found = {value["Fn::FindInMap"][0]} if isinstance(value.get("Fn::FindInMap"), list) else set()
        return found.union(*(mappings_read(inner) for inner in value.values()))
    return set().union(*(mappings_read(inner) for inner in value)) if isinstance(value, list) else set()


def load(path):
    """The template at `path`, parsed and expanded."""
    with open(path) as file:
        return expanded(yaml_parse(file.read()))


def leftovers(value, identifiers, at="template"):
    """Where `value` still names a loop's identifier after the expansion: a place cfn-lint does not
    substitute it (a plain string, a condition's name) and CloudFormation or the SAM CLI may."""
    def names(text):
        return any(re.search(rf"[$&]\{{{name}\}}", str(text)) for name in identifiers)

    if isinstance(value, dict):
        for key, inner in value.items():
            if names(key):
                yield f"{at}: the key {key}"
            yield from leftovers(inner, identifiers, f"{at}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from leftovers(inner, identifiers, f"{at}[{index}]")
    elif isinstance(value, str) and names(value):
        yield f"{at}: {value!r}"


def loop_identifiers(value):
    if isinstance(value, dict):
        for key, inner in value.items():
            if str(key).startswith("Fn::ForEach::") and isinstance(inner, list) and inner:
                yield inner[0]
            yield from loop_identifiers(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from loop_identifiers(inner)


def shape(template):
    """What the SAM CLI builds and deploys by, per section: each logical id, and of a resource its type,
    condition, dependencies and metadata (where sam build finds a function's binary)."""
    fields = ("Type", "Condition", "DependsOn", "Metadata")
    return {section: {name: {field: json.dumps(item.get(field), sort_keys=True, default=str) for field in fields}
                      if section == "Resources" else None
                      for name, item in template.get(section, {}).items()}
            for section in ("Resources", "Outputs", "Conditions")}


def disagreements(path):
    """Where the SAM CLI's expansion (sam build's, sam local's) and the checks' may differ, and whether
    samconfig.toml turns the SAM CLI's on."""
    from samcli.lib.cfn_language_extensions.sam_integration import expand_language_extensions

    with open(path) as file:
        written = yaml_parse(file.read())
    checks_read = expanded(written)
    problems = [f"cfn-lint leaves a loop's identifier in {place}"
                for place in leftovers(checks_read, set(loop_identifiers(written)))]
    try:
        theirs = shape(expand_language_extensions(copy.deepcopy(written), enabled=True).expanded_template)
    except Exception as error:  # noqa: BLE001 (the SAM CLI's refusal, of any kind, is the finding)
        return problems + [f"the SAM CLI cannot expand it ({type(error).__name__}: {error}), so sam build cannot"]
    ours = shape(checks_read)
    for section, items in ours.items():
        for name in sorted(set(items) | set(theirs[section])):
            if items.get(name, "absent") != theirs[section].get(name, "absent"):
                problems.append(f"{section}.{name}: the SAM CLI expands it to {theirs[section].get(name, 'nothing')}, "
                                f"the checks to {items.get(name, 'nothing')}")
    config = pathlib.Path(path).resolve().parent / "samconfig.toml"
    settings = tomllib.loads(config.read_text()) if config.exists() else {}
    if has_loop(written) and not settings.get("default", {}).get("global", {}).get("parameters", {}).get(
            "language_extensions"):
        problems.append(f"{config} does not set language_extensions for every SAM CLI command, and sam build "
                        "cannot read a template with loops without it")
    return problems


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    problems = disagreements(path)
    for problem in problems:
        print(f"{path}: expansion: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"{path}: the SAM CLI and cfn-lint expand its loops to the same resources, and samconfig.toml has "
          "the SAM CLI expand them")


if __name__ == "__main__":
    main()
