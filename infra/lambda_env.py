#!/usr/bin/env python3
"""Print the environment template.yaml gives one function, as a JSON object of name to value
(or, given a secret's logical id, the JSON object the template puts in that secret).

The bootstrap tests (functions/*/tests/bootstrap.rs) start the built binaries with exactly this
environment, so the template and the code cannot drift apart: a variable the code requires and
the template does not set fails a test, not a deploy.

The function's Environment.Variables are merged over Globals.Function's. Intrinsics are
resolved: parameters to their defaults (or to a value given), pseudo parameters (AWS::Region,
...) to fixed test values, conditions evaluated under those, Fn::If / Fn::Sub / Fn::Join
rendered (Fn::Select and Fn::Split too). A Ref to a resource or a Fn::GetAtt has no value
offline: the caller names it
(`Table=my-test-table`, `HttpApi.ApiEndpoint=...`), and an unnamed one is an error that names it,
so a new reference in the template makes the test say what it stands for.

A function URL's address is `<Function>Url.FunctionUrl` (SAM's FunctionUrlConfig makes the
resource `<Function>Url`), e.g. `WebFunctionUrl.FunctionUrl=https://abc.lambda-url.us-east-1.on.aws/`.

Usage: lambda_env.py TEMPLATE FUNCTION_OR_SECRET_LOGICAL_ID [NAME=VALUE ...]
Needs PyYAML (moto, which scripts/test installs, depends on it).
"""

import json
import re
import sys

import yaml

PSEUDO = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "bridle-test",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/bridle-test/0",
    "AWS::NoValue": None,
}


class Unresolved(Exception):
    pass


class Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short forms (!Ref, !Sub, ...) read as their long forms."""


def _short_form(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "Condition":
        return {"Condition": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


Loader.add_multi_constructor("!", _short_form)


class Resolver:
    def __init__(self, template, given):
        self.template = template
        self.given = given
        self.params = {}
        for name, spec in template.get("Parameters", {}).items():
            if name in given:
                self.params[name] = given[name]
            elif "Default" in spec:
                self.params[name] = str(spec["Default"])
        self.conditions = {}
        self._conditions = template.get("Conditions", {})

    def ref(self, name):
        if name in self.given:
            return self.given[name]
        if name in self.params:
            return self.params[name]
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.template.get("Parameters", {}):
            raise Unresolved(f"parameter {name} has no default: give {name}=VALUE")
        raise Unresolved(f"the template refers to {name}: say what it is with {name}=VALUE")

    def get_att(self, resource, attribute):
        key = f"{resource}.{attribute}"
        if key in self.given:
            return self.given[key]
        raise Unresolved(f"the template uses {key}: say what it is with {key}=VALUE")

    def condition(self, name):
        if name not in self.conditions:
            if name not in self._conditions:
                raise Unresolved(f"unknown condition {name}")
            self.conditions[name] = self.truth(self._conditions[name])
        return self.conditions[name]

    def truth(self, expr):
        (fn, args), = expr.items()
        if fn == "Condition":
            return self.condition(args)
        if fn == "Fn::Equals":
            return self.value(args[0]) == self.value(args[1])
        if fn == "Fn::Not":
            return not self.truth(args[0])
        if fn == "Fn::And":
            return all(self.truth(a) for a in args)
        if fn == "Fn::Or":
            return any(self.truth(a) for a in args)
        raise Unresolved(f"unsupported condition function {fn}")

    def sub(self, text, names):
        def one(m):
            name = m.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in names:
                return self.value(names[name])
            if "." in name and name not in PSEUDO:
                return self.get_att(*name.split(".", 1))
            return self.ref(name)

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def value(self, v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return str(v)
        if isinstance(v, str) or v is None:
            return v
        if isinstance(v, dict) and len(v) == 1:
            (fn, args), = v.items()
            if fn == "Ref":
                return self.ref(args)
            if fn == "Fn::GetAtt":
                return self.get_att(args[0], args[1])
            if fn == "Fn::Sub":
                if isinstance(args, str):
                    return self.sub(args, {})
                return self.sub(args[0], args[1])
            if fn == "Fn::If":
                name, yes, no = args
                return self.value(yes if self.condition(name) else no)
            if fn == "Fn::Join":
                return args[0].join(self.value(x) for x in args[1])
            if fn == "Fn::Split":
                return self.value(args[1]).split(args[0])
            if fn == "Fn::Select":
                items = args[1]
                items = self.value(items) if isinstance(items, dict) else [self.value(x) for x in items]
                return items[int(self.value(args[0]))]
        raise Unresolved(f"unsupported value {v!r}")


def function_env(template, function, given):
    resolver = Resolver(template, given)
    resources = template.get("Resources", {})
    if function not in resources:
        raise Unresolved(f"no resource {function} in the template")
    variables = {}
    globals_env = template.get("Globals", {}).get("Function", {}).get("Environment", {})
    variables.update(globals_env.get("Variables", {}))
    own = resources[function].get("Properties", {}).get("Environment", {})
    variables.update(own.get("Variables", {}))
    env = {}
    for name, raw in variables.items():
        value = resolver.value(raw)
        if value is not None:  # AWS::NoValue: the variable is not set
            env[name] = value
    return env


def secret_value(template, secret, given):
    """The JSON object a secret's SecretString holds, intrinsics resolved as for a function."""
    resolver = Resolver(template, given)
    resource = template.get("Resources", {}).get(secret)
    if resource is None:
        raise Unresolved(f"no resource {secret} in the template")
    props = resource.get("Properties", {})
    if "SecretString" not in props:
        raise Unresolved(f"{secret} has no SecretString (a generated secret has no value offline)")
    return json.loads(resolver.value(props["SecretString"]))


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    given = {}
    for pair in argv[3:]:
        name, sep, value = pair.partition("=")
        if not sep:
            print(f"{pair!r} is not NAME=VALUE", file=sys.stderr)
            return 2
        given[name] = value
    with open(argv[1]) as f:
        template = yaml.load(f, Loader=Loader)
    try:
        resource = template.get("Resources", {}).get(argv[2], {})
        if resource.get("Type") == "AWS::SecretsManager::Secret":
            env = secret_value(template, argv[2], given)
        else:
            env = function_env(template, argv[2], given)
    except Unresolved as e:
        print(f"{argv[1]}, {argv[2]}: {e}", file=sys.stderr)
        return 1
    json.dump(env, sys.stdout, indent=2, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
