"""compare.py catches a difference between the stacks, and passes identical ones.

Run: python -m unittest infra/test_compare.py, with BRIDLE_CDK_TEMPLATE pointing at the
synthesized CDK template (infra/check sets it)."""

import copy
import json
import os
import re
import unittest

import compare

HERE = os.path.dirname(os.path.abspath(__file__))


class ParameterPatternsTest(unittest.TestCase):
    """A setting the functions would refuse at start-up (every message then failing into the
    dead-letter queue, or the web app not starting) is refused at deploy instead, and one they
    accept is not: the samples in parameter_samples.json, which the functions' unit tests hold
    them to."""

    def test_the_parameters_accept_what_the_functions_accept(self):
        sam = compare.expand_sam(os.path.join(HERE, "template.yaml"))
        with open(os.path.join(HERE, "parameter_samples.json")) as f:
            samples = json.load(f)
        for name, kind in samples["parameters"].items():
            pattern = sam["Parameters"][name]["AllowedPattern"]
            for value in samples[kind]["accepted"]:
                self.assertTrue(re.fullmatch(pattern, value), f"{name} refuses {value!r}")
            for value in samples[kind]["refused"]:
                self.assertFalse(re.fullmatch(pattern, value), f"{name} accepts {value!r}")


class AlarmTopicTest(unittest.TestCase):
    """The alarm topic's policy replaces SNS's default one (which let the account's CloudWatch
    alarms publish): every kind of resource that notifies the topic has its service allowed to
    publish, or its notices never arrive (the alarm's history says "not authorized")."""

    NOTIFIERS = {
        "AWS::CloudWatch::Alarm": "cloudwatch.amazonaws.com",
        "AWS::Budgets::Budget": "budgets.amazonaws.com",
    }

    def test_every_notifier_may_publish_to_the_topic(self):
        sam = compare.expand_sam(os.path.join(HERE, "template.yaml"))
        resources = sam["Resources"]
        policies = [
            r for r in resources.values()
            if r["Type"] == "AWS::SNS::TopicPolicy" and {"Ref": "AlarmTopic"} in r["Properties"]["Topics"]
        ]
        self.assertEqual(len(policies), 1)
        allowed = {
            st["Principal"]["Service"]
            for st in policies[0]["Properties"]["PolicyDocument"]["Statement"]
            if st["Effect"] == "Allow" and isinstance(st.get("Principal"), dict)
            and "Service" in st["Principal"]
        }
        notifying = {
            self.NOTIFIERS[r["Type"]]
            for r in resources.values()
            if r["Type"] in self.NOTIFIERS and "AlarmTopic" in json.dumps(r["Properties"])
        }
        self.assertEqual(notifying, set(self.NOTIFIERS.values()), "both kinds notify the topic")
        self.assertLessEqual(notifying, allowed)


class CallbackOutputTest(unittest.TestCase):
    """The callback the operator is told to register at their own issuer is the one the web app
    sends (from BRIDLE_PUBLIC_URL: PublicBaseUrl when set), as the Cognito client's is."""

    def test_the_output_is_the_clients_callback(self):
        sam = compare.expand_sam(os.path.join(HERE, "template.yaml"))
        client = sam["Resources"]["UserPoolClient"]["Properties"]["CallbackURLs"][0]
        self.assertEqual(sam["Outputs"]["OidcCallbackUrl"]["Value"], client)


class CompareTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sam = compare.expand_sam(os.path.join(HERE, "template.yaml"))
        path = os.environ.get("BRIDLE_CDK_TEMPLATE", os.path.join(HERE, "cdk", "cdk.out", "bridle.template.json"))
        with open(path) as f:
            cls.cdk = json.load(f)

    def problems_after(self, change):
        cdk = copy.deepcopy(self.cdk)
        change(cdk["Resources"])
        return compare.compare(self.sam, cdk)

    def test_the_two_stacks_agree(self):
        self.assertEqual(compare.compare(self.sam, self.cdk), [])

    def test_a_different_max_receive_count_is_caught(self):
        def change(r):
            r["TurnQueue"]["Properties"]["RedrivePolicy"]["maxReceiveCount"] = 3
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("TurnQueue.RedrivePolicy") for p in problems), problems)

    def test_an_extra_iam_action_is_caught(self):
        def change(r):
            st = r["WebhookRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            st.append({"Effect": "Allow", "Action": "sqs:DeleteQueue", "Resource": "*"})
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("WebhookRole.Policies") for p in problems), problems)

    def test_a_missing_route_is_caught(self):
        def change(r):
            for lid in [k for k, v in r.items() if v["Type"] == "AWS::ApiGatewayV2::Route"
                        and v["Properties"]["RouteKey"] == "POST /webhooks/slack"]:
                del r[lid]
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("routes") for p in problems), problems)

    def test_a_resource_only_one_side_has_is_caught(self):
        def change(r):
            del r["BedrockThrottlesAlarm"]
        problems = self.problems_after(change)
        self.assertIn("BedrockThrottlesAlarm (AWS::CloudWatch::Alarm): only in the SAM template", problems)

    def test_a_different_event_source_setting_is_caught(self):
        def change(r):
            r["WorkerFunctionTurns"]["Properties"]["FunctionResponseTypes"] = []
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("WorkerFunctionTurns.FunctionResponseTypes") for p in problems), problems)


    def test_a_looser_media_grant_is_caught(self):
        def change(r):
            st = r["WorkerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            media = next(s for s in st if s.get("Sid") == "Media")
            media["Resource"] = {"Fn::Join": ["", [{"Fn::GetAtt": ["MediaBucket", "Arn"]}, "/*"]]}
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("WorkerRole.Policies") for p in problems), problems)

    def test_a_different_media_expiry_is_caught(self):
        def change(r):
            r["MediaBucket"]["Properties"]["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] = 30
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("MediaBucket.LifecycleConfiguration") for p in problems), problems)

    def test_a_missing_tls_deny_on_the_bucket_is_caught(self):
        def change(r):
            r["MediaBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"] = []
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("MediaBucketPolicy.PolicyDocument") for p in problems), problems)


    def test_a_buffered_function_url_is_caught(self):
        def change(r):
            r["WebFunctionUrl"]["Properties"]["InvokeMode"] = "BUFFERED"
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("WebFunctionUrl.InvokeMode") for p in problems), problems)

    def test_a_missing_function_url_invoke_grant_is_caught(self):
        def change(r):
            for lid in [k for k, v in r.items() if v["Type"] == "AWS::Lambda::Permission"
                        and v["Properties"].get("InvokedViaFunctionUrl")]:
                del r[lid]
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("Lambda permissions") for p in problems), problems)

    def test_a_cognito_resource_without_its_condition_is_caught(self):
        def change(r):
            del r["UserPoolClient"]["Condition"]
        problems = self.problems_after(change)
        self.assertIn("UserPoolClient.Condition: SAM UseCognito != CDK None", problems)

    def test_a_different_web_secret_key_is_caught(self):
        def change(r):
            sub = r["WebSecrets"]["Properties"]["SecretString"]["Fn::Sub"]
            sub[0] = sub[0].replace("BRIDLE_PUBLIC_URL", "BRIDLE_PUBLIC_BASE")
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("WebSecrets.SecretString") for p in problems), problems)

    def test_a_web_role_reading_another_secret_is_caught(self):
        def change(r):
            st = r["WebRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            next(s for s in st if s.get("Sid") == "Secrets")["Resource"] = "*"
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("WebRole.Policies") for p in problems), problems)

    def test_an_output_condition_is_compared(self):
        cdk = copy.deepcopy(self.cdk)
        del cdk["Outputs"]["UserPoolId"]["Condition"]
        self.assertIn("output UserPoolId condition: SAM UseCognito != CDK None", compare.compare(self.sam, cdk))

    def test_a_looser_parameter_pattern_is_caught(self):
        cdk = copy.deepcopy(self.cdk)
        cdk["Parameters"]["BridleModelTimeoutS"]["AllowedPattern"] = "^$|^[0-9]+$"
        problems = compare.compare(self.sam, cdk)
        self.assertTrue(any(p.startswith("parameter BridleModelTimeoutS AllowedPattern") for p in problems), problems)

    def test_a_missing_allowed_value_list_is_caught(self):
        cdk = copy.deepcopy(self.cdk)
        del cdk["Parameters"]["BridleToolChoice"]["AllowedValues"]
        problems = compare.compare(self.sam, cdk)
        self.assertTrue(any(p.startswith("parameter BridleToolChoice AllowedValues") for p in problems), problems)

    def test_a_setting_the_web_function_lacks_is_caught(self):
        def change(r):
            del r["WebFunction"]["Properties"]["Environment"]["Variables"]["BRIDLE_CONFIRMATION_TTL_S"]
        problems = self.problems_after(change)
        self.assertTrue(any(p.startswith("WebFunction.Environment") for p in problems), problems)

if __name__ == "__main__":
    unittest.main()
