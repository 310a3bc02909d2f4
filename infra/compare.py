#!/usr/bin/env python3
"""Check that the SAM template and the synthesized CDK template describe the same stack.

The SAM template is expanded with samtranslator (what `sam deploy` sends to CloudFormation),
then both templates are normalised: parameters resolved to their defaults, conditions evaluated
under them, Fn::Sub / Fn::Join / Ref / GetAtt rendered to one canonical string form, IAM
statements sorted. Then, resource by resource (both use the same logical ids), the types and the
properties that matter are compared; routes are compared as route keys (SAM embeds them in the
API's OpenAPI body, CDK makes Route resources); parameters by their defaults and what each
accepts (type, allowed values or pattern, bounds). Exits 1 and lists every difference.

Usage: compare.py SAM_TEMPLATE CDK_TEMPLATE_JSON
"""

import json
import os
import re
import sys

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

# Resources only one side makes, by construction: plumbing, not design.
SAM_ONLY_TYPES = {"AWS::Lambda::Permission"}
CDK_ONLY_TYPES = {
    "AWS::CDK::Metadata",
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Integration",
    "AWS::Lambda::Permission",
}
# Properties that differ by construction (code location, tags, the API's body vs routes).
IGNORED_PROPERTIES = {
    "AWS::Lambda::Function": {"Code", "Tags"},
    "AWS::ApiGatewayV2::Api": {"Body", "Name", "ProtocolType", "Tags"},
    "AWS::ApiGatewayV2::Stage": {"Tags"},
    "AWS::SecretsManager::Secret": {"Tags"},
}
# Parameters only one side has: CDK's bootstrap check; SAM's architecture (a CDK context value,
# since RustFunction must know it to build).
IGNORED_PARAMETERS = {"BootstrapVersion", "Architecture"}
# What a parameter accepts, compared as well as its default.
PARAMETER_CONSTRAINTS = ("Type", "AllowedValues", "AllowedPattern", "MinValue", "MaxValue", "NoEcho")


class Resolver:
    """Renders a template's values with parameters at their defaults."""

    def __init__(self, template):
        self.params = {
            k: v.get("Default") for k, v in template.get("Parameters", {}).items()
        }
        self.params.setdefault("Architecture", "arm64")
        self.conditions = {}
        for name, expr in template.get("Conditions", {}).items():
            self.conditions[name] = self.condition(expr)

    def condition(self, expr):
        if isinstance(expr, dict) and len(expr) == 1:
            (k, v), = expr.items()
            if k == "Fn::Not":
                return not self.condition(v[0])
            if k == "Fn::Equals":
                return self.value(v[0]) == self.value(v[1])
            if k == "Condition":
                return self.conditions[v]
        raise ValueError(f"unsupported condition {expr!r}")

    def sub(self, text, extra=None):
        def one(m):
            name = m.group(1)
            if extra and name in extra:
                return self.str(extra[name])
            return self.token(name)

        return re.sub(r"\$\{([^}!]+)\}", one, text)

    def token(self, name):
        if name in self.params:
            return str(self.params[name])
        if "." in name:
            res, attr = name.split(".", 1)
            return f"<{res}.{attr}>"
        return f"<{name}>"

    def str(self, v):
        v = self.value(v)
        return v if isinstance(v, str) else json.dumps(v, sort_keys=True)

    def value(self, v):
        if isinstance(v, list):
            out = [self.value(x) for x in v]
            return [x for x in out if x != "<AWS::NoValue>"]
        if not isinstance(v, dict):
            return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
        if len(v) == 1:
            (k, a), = v.items()
            if k == "Ref":
                return self.token(a)
            if k == "Fn::GetAtt":
                res, attr = (a.split(".", 1) if isinstance(a, str) else a)
                return f"<{res}.{attr}>"
            if k == "Fn::Sub":
                if isinstance(a, str):
                    return self.sub(a)
                return self.sub(a[0], a[1])
            if k == "Fn::Join":
                return a[0].join(self.str(x) for x in a[1])
            if k == "Fn::If":
                name, yes, no = a
                return self.value(yes if self.conditions[name] else no)
            if k == "Fn::Split":
                delimiter, source = a
                source = self.str(source)
                # A placeholder (<Resource.Attribute>) has no parts offline: keep the expression.
                return [f"<split {source} on {delimiter}>"] if "<" in source else source.split(delimiter)
            if k == "Fn::Select":
                index, items = self.value(a[0]), self.value(a[1])
                if len(items) == 1 and items[0].startswith("<split "):
                    return f"<item {index} of {items[0][1:-1]}>"
                return items[int(index)]
        return {
            k: self.value(x)
            for k, x in v.items()
            if self.value(x) != "<AWS::NoValue>"
        }


def normalise_policy(doc):
    """Statements as sorted, comparable dicts (Action/Resource always sorted lists)."""
    out = []
    for st in doc.get("Statement", []):
        st = dict(st)
        if st.get("Principal") == "*":
            st["Principal"] = {"AWS": "*"}  # the same principal, two spellings
        for key in ("Action", "Resource"):
            if key in st:
                v = st[key]
                st[key] = sorted(v if isinstance(v, list) else [v])
        out.append(st)
    return sorted(out, key=lambda s: json.dumps(s, sort_keys=True))


def normalise(rtype, props):
    props = dict(props)
    if rtype == "AWS::ApiGatewayV2::Api" and "Body" in props:
        # SAM puts the API's description in the OpenAPI body's info.
        props.setdefault("Description", props["Body"].get("info", {}).get("description"))
    for key in IGNORED_PROPERTIES.get(rtype, ()):
        props.pop(key, None)
    if rtype == "AWS::IAM::Role":
        props["AssumeRolePolicyDocument"] = normalise_policy(props["AssumeRolePolicyDocument"])
        props["Policies"] = sorted(
            (
                {"PolicyName": p["PolicyName"], "Statement": normalise_policy(p["PolicyDocument"])}
                for p in props.get("Policies", [])
            ),
            key=lambda p: p["PolicyName"],
        )
    if rtype in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy", "AWS::S3::BucketPolicy"):
        props["PolicyDocument"] = normalise_policy(props["PolicyDocument"])
        for key in ("Queues", "Topics"):
            if key in props:
                props[key] = sorted(props[key])
    if rtype == "AWS::Lambda::Url" and isinstance(props.get("TargetFunctionArn"), str):
        # SAM names the function (Ref), CDK gives its ARN (GetAtt .Arn): both name one function.
        props["TargetFunctionArn"] = props["TargetFunctionArn"].replace(".Arn>", ">")
    if rtype == "AWS::DynamoDB::Table":
        props["AttributeDefinitions"] = sorted(
            props["AttributeDefinitions"], key=lambda a: a["AttributeName"]
        )
        # AWS-managed KMS is what SSEEnabled: true means; CDK also spells out the type.
        sse = props.get("SSESpecification", {})
        if sse.get("SSEType") == "KMS" and "KMSMasterKeyId" not in sse:
            sse.pop("SSEType")
    return props


def routes_sam(resources):
    keys = set()
    for r in resources.values():
        if r["Type"] == "AWS::ApiGatewayV2::Api":
            for path, methods in r["Properties"].get("Body", {}).get("paths", {}).items():
                for m in methods:
                    keys.add(f"{m.upper()} {path}")
    return keys


def routes_cdk(resources):
    return {
        r["Properties"]["RouteKey"]
        for r in resources.values()
        if r["Type"] == "AWS::ApiGatewayV2::Route"
    }


def permissions(resources, resolver):
    """(function, principal, action, function URL auth type, via function URL only) for each
    Lambda permission (the two a public function URL needs included)."""
    return sorted(
        (resolver.str(r["Properties"]["FunctionName"]).removesuffix(".Arn>").rstrip(">") + ">",
         r["Properties"]["Principal"],
         r["Properties"].get("Action", ""),
         r["Properties"].get("FunctionUrlAuthType", ""),
         str(r["Properties"].get("InvokedViaFunctionUrl", "")).lower())
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Permission"
    )


def expand_sam(path):
    with open(path) as f:
        template = yaml_parse(f.read())
    for r in template["Resources"].values():
        if r["Type"] == "AWS::Serverless::Function":
            r["Properties"]["CodeUri"] = "s3://bucket/key"  # where `sam deploy` would upload

    class NoManagedPolicies:
        def load(self):
            return {}

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return transform(template, {}, NoManagedPolicies())


def compare(sam, cdk):
    problems = []
    rs, rc = Resolver(sam), Resolver(cdk)
    sres, cres = sam["Resources"], cdk["Resources"]

    for lid in sorted(set(sres) | set(cres)):
        s, c = sres.get(lid), cres.get(lid)
        if s is None:
            if c["Type"] not in CDK_ONLY_TYPES:
                problems.append(f"{lid} ({c['Type']}): only in the CDK stack")
            continue
        if c is None:
            if s["Type"] not in SAM_ONLY_TYPES:
                problems.append(f"{lid} ({s['Type']}): only in the SAM template")
            continue
        if s["Type"] != c["Type"]:
            problems.append(f"{lid}: type {s['Type']} (SAM) != {c['Type']} (CDK)")
            continue
        sp = normalise(s["Type"], rs.value(s.get("Properties", {})))
        cp = normalise(c["Type"], rc.value(c.get("Properties", {})))
        for key in sorted(set(sp) | set(cp)):
            if sp.get(key) != cp.get(key):
                problems.append(
                    f"{lid}.{key}:\n    SAM {json.dumps(sp.get(key), sort_keys=True)}"
                    f"\n    CDK {json.dumps(cp.get(key), sort_keys=True)}"
                )
        for attr in ("DeletionPolicy", "UpdateReplacePolicy", "Condition"):
            sv, cv = s.get(attr, "Delete" if "Policy" in attr else None), c.get(attr, "Delete" if "Policy" in attr else None)
            if sv != cv:
                problems.append(f"{lid}.{attr}: SAM {sv} != CDK {cv}")

    if routes_sam(sres) != routes_cdk(cres):
        problems.append(f"routes: SAM {sorted(routes_sam(sres))} != CDK {sorted(routes_cdk(cres))}")
    if permissions(sres, rs) != permissions(cres, rc):
        problems.append(f"Lambda permissions: SAM {permissions(sres, rs)} != CDK {permissions(cres, rc)}")

    sparams = set(sam.get("Parameters", {})) - IGNORED_PARAMETERS
    cparams = set(cdk.get("Parameters", {})) - IGNORED_PARAMETERS
    if sparams != cparams:
        problems.append(f"parameters: only SAM {sorted(sparams - cparams)}, only CDK {sorted(cparams - sparams)}")
    for name in sorted(sparams & cparams):
        sp, cp = sam["Parameters"][name], cdk["Parameters"][name]
        sd, cd = sp.get("Default"), cp.get("Default")
        if str(sd) != str(cd):
            problems.append(f"parameter {name} default: SAM {sd!r} != CDK {cd!r}")
        # What the parameter accepts: a looser pattern on one side lets through a value the
        # functions refuse at start-up.
        for attr in PARAMETER_CONSTRAINTS:
            sv, cv = sp.get(attr), cp.get(attr)
            if json.dumps(sv) != json.dumps(cv):
                problems.append(f"parameter {name} {attr}: SAM {sv!r} != CDK {cv!r}")

    souts, couts = sam.get("Outputs", {}), cdk.get("Outputs", {})
    if set(souts) != set(couts):
        problems.append(f"outputs: only SAM {sorted(set(souts) - set(couts))}, only CDK {sorted(set(couts) - set(souts))}")
    for name in sorted(set(souts) & set(couts)):
        sv, cv = rs.str(souts[name]["Value"]), rc.str(couts[name]["Value"])
        if sv != cv:
            problems.append(f"output {name}: SAM {sv} != CDK {cv}")
        sc, cc = souts[name].get("Condition"), couts[name].get("Condition")
        if sc != cc:
            problems.append(f"output {name} condition: SAM {sc} != CDK {cc}")
    return problems


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    sam = expand_sam(argv[1])
    with open(argv[2]) as f:
        cdk = json.load(f)
    problems = compare(sam, cdk)
    shared = sorted(set(sam["Resources"]) & set(cdk["Resources"]))
    if problems:
        print(f"SAM and CDK differ ({len(problems)}):")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(f"SAM and CDK define the same stack: {len(shared)} resources compared, "
          f"routes {sorted(routes_sam(sam['Resources']))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
