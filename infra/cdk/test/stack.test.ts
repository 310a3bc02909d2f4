// Assertion tests for the CDK stack: IAM policies, FIFO/DLQ wiring, the event source, alarms,
// and cdk-nag clean. Asset bundling is skipped (no cargo build in a test).

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Architecture } from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import { BridleStack, MAX_RECEIVE_COUNT, MEDIA_EXPIRY_DAYS, ROUTES, WORKER_TIMEOUT_S } from '../lib/stack';

function synth(): { app: App; template: Template } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new BridleStack(app, 'Bridle', { architecture: Architecture.ARM_64, analyticsReporting: false });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, template: Template.fromStack(stack) };
}
const { app, template } = synth();

type Statement = { Sid?: string; Action: string | string[]; Resource: unknown; Effect: string };
function statements(roleId: string): Statement[] {
  const role = template.toJSON().Resources[roleId];
  return role.Properties.Policies.flatMap((p: { PolicyDocument: { Statement: Statement[] } }) => p.PolicyDocument.Statement);
}
const actions = (s: Statement) => (Array.isArray(s.Action) ? s.Action : [s.Action]);

test('each function has its own role, and no other IAM policy is attached', () => {
  const fns = template.findResources('AWS::Lambda::Function');
  assert.deepEqual(fns.WebhookFunction.Properties.Role, { 'Fn::GetAtt': ['WebhookRole', 'Arn'] });
  assert.deepEqual(fns.WorkerFunction.Properties.Role, { 'Fn::GetAtt': ['WorkerRole', 'Arn'] });
  template.resourceCountIs('AWS::IAM::Policy', 0);
  template.resourceCountIs('AWS::IAM::Role', 2);
  for (const role of Object.values(template.findResources('AWS::IAM::Role'))) {
    assert.equal(role.Properties.ManagedPolicyArns, undefined, 'no managed policies');
  }
});

test('the webhook may only enqueue, read its secret and write its logs', () => {
  const st = statements('WebhookRole');
  assert.deepEqual(st.flatMap(actions).sort(), [
    'logs:CreateLogStream', 'logs:PutLogEvents', 'secretsmanager:GetSecretValue',
    'sqs:GetQueueAttributes', 'sqs:SendMessage',
  ]);
  const enqueue = st.find((s) => s.Sid === 'Enqueue')!;
  assert.deepEqual(enqueue.Resource, { 'Fn::GetAtt': ['TurnQueue', 'Arn'] });
  assert.deepEqual(st.find((s) => s.Sid === 'Secrets')!.Resource, { Ref: 'WebhookSecrets' });
  assert.ok(!st.flatMap(actions).some((a) => a.startsWith('bedrock:') || a.startsWith('dynamodb:')));
});

test('the worker may call only the configured model, the table, its secret and its queue', () => {
  const st = statements('WorkerRole');
  assert.ok(st.every((s) => actions(s).every((a) => !a.includes('*'))), 'no wildcard action');
  const model = st.find((s) => s.Sid === 'Model')!;
  assert.deepEqual(actions(model), ['bedrock:InvokeModelWithResponseStream']);
  const resources = JSON.stringify(model.Resource);
  assert.match(resources, /foundation-model\/\$\{BedrockModelId\}/);
  assert.match(resources, /inference-profile\/\$\{BedrockInferenceProfileId\}/);
  const table = st.find((s) => s.Sid === 'Table')!;
  assert.ok(!actions(table).includes('dynamodb:Scan') && !actions(table).includes('dynamodb:DeleteTable'));
  assert.match(JSON.stringify(table.Resource), /index\/gsi1/);
  assert.deepEqual(st.find((s) => s.Sid === 'Secrets')!.Resource, { Ref: 'WorkerSecrets' });
  assert.ok(!st.flatMap(actions).includes('sqs:SendMessage'), 'the worker does not enqueue');
});

test('the worker may only put and get attachments under media/ in the media bucket', () => {
  const st = statements('WorkerRole');
  const media = st.find((s) => s.Sid === 'Media')!;
  assert.deepEqual(actions(media).sort(), ['s3:GetObject', 's3:PutObject']);
  assert.deepEqual(media.Resource, { 'Fn::Join': ['', [{ 'Fn::GetAtt': ['MediaBucket', 'Arn'] }, '/media/*']] });
  const s3 = st.flatMap(actions).filter((a) => a.startsWith('s3:')).sort();
  assert.deepEqual(s3, ['s3:GetObject', 's3:PutObject'], 'no other S3 action anywhere');
  template.hasResourceProperties('AWS::Lambda::Function', {
    Environment: { Variables: Match.objectLike({ BRIDLE_MEDIA_BUCKET: { Ref: 'MediaBucket' } }) },
  });
});

test('the media bucket is private, encrypted, TLS-only, kept on delete and expires attachments', () => {
  template.resourceCountIs('AWS::S3::Bucket', 1);
  const bucket = template.toJSON().Resources.MediaBucket;
  assert.equal(bucket.DeletionPolicy, 'Retain');
  assert.deepEqual(bucket.Properties.PublicAccessBlockConfiguration, {
    BlockPublicAcls: true, BlockPublicPolicy: true, IgnorePublicAcls: true, RestrictPublicBuckets: true,
  });
  assert.deepEqual(bucket.Properties.BucketEncryption.ServerSideEncryptionConfiguration,
    [{ ServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }]);
  const [rule] = bucket.Properties.LifecycleConfiguration.Rules;
  assert.equal(rule.Status, 'Enabled');
  assert.equal(rule.ExpirationInDays, MEDIA_EXPIRY_DAYS);
  template.resourceCountIs('AWS::S3::BucketPolicy', 1);
  const policy = template.toJSON().Resources.MediaBucketPolicy.Properties;
  assert.deepEqual(policy.Bucket, { Ref: 'MediaBucket' });
  assert.deepEqual(policy.PolicyDocument.Statement, [{
    Sid: 'DenyInsecureTransport', Effect: 'Deny', Principal: { AWS: '*' }, Action: 's3:*',
    Resource: [{ 'Fn::GetAtt': ['MediaBucket', 'Arn'] },
      { 'Fn::Join': ['', [{ 'Fn::GetAtt': ['MediaBucket', 'Arn'] }, '/*']] }],
    Condition: { Bool: { 'aws:SecureTransport': 'false' } },
  }]);
});

test('the queue is FIFO with a FIFO dead-letter queue after 5 receives and 6x the worker timeout', () => {
  assert.ok(MAX_RECEIVE_COUNT >= 5);
  template.hasResourceProperties('AWS::SQS::Queue', {
    FifoQueue: true,
    VisibilityTimeout: 6 * WORKER_TIMEOUT_S,
    RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': ['TurnDeadLetterQueue', 'Arn'] }, maxReceiveCount: MAX_RECEIVE_COUNT },
  });
  const dlq = template.toJSON().Resources.TurnDeadLetterQueue;
  assert.equal(dlq.Properties.FifoQueue, true);
  template.hasResourceProperties('AWS::Lambda::Function', { Timeout: WORKER_TIMEOUT_S, Environment: { Variables: Match.objectLike({ TABLE_NAME: { Ref: 'Table' } }) } });
});

test('the worker gets every variable its config requires; PUBLIC_BASE_URL is PublicBaseUrl, else the API', () => {
  const vars = template.toJSON().Resources.WorkerFunction.Properties.Environment.Variables;
  for (const name of ['TABLE_NAME', 'BEDROCK_MODEL_ID', 'PUBLIC_BASE_URL', 'BRIDLE_SECRETS_ARN']) {
    assert.ok(vars[name], `${name} is set on the worker`);
  }
  assert.deepEqual(vars.PUBLIC_BASE_URL, {
    'Fn::If': ['HasPublicBaseUrl', { Ref: 'PublicBaseUrl' },
      { 'Fn::Sub': 'https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}' }],
  });
});

test('the worker reads the queue with partial batch failures and bounded concurrency', () => {
  template.resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
  template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
    EventSourceArn: { 'Fn::GetAtt': ['TurnQueue', 'Arn'] },
    FunctionName: { Ref: 'WorkerFunction' },
    BatchSize: 5,
    FunctionResponseTypes: ['ReportBatchItemFailures'],
    ScalingConfig: { MaximumConcurrency: { Ref: 'WorkerMaxConcurrency' } },
  });
});

test('the table has the store layout, TTL, PITR and encryption', () => {
  template.hasResourceProperties('AWS::DynamoDB::Table', {
    KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }, { AttributeName: 'sk', KeyType: 'RANGE' }],
    BillingMode: 'PAY_PER_REQUEST',
    TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
    PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    SSESpecification: Match.objectLike({ SSEEnabled: true }),
    GlobalSecondaryIndexes: [Match.objectLike({ IndexName: 'gsi1' })],
    LocalSecondaryIndexes: [Match.objectLike({ IndexName: 'lsi1' })],
  });
});

test('every alarm the runbook names exists and notifies the topic', () => {
  const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map((a) => a.Properties);
  const has = (ns: string, metric: string) =>
    alarms.filter((a) => a.Namespace === ns && a.MetricName === metric);
  assert.equal(has('AWS/SQS', 'ApproximateNumberOfMessagesVisible').length, 1, 'DLQ depth');
  assert.equal(has('AWS/SQS', 'ApproximateNumberOfMessagesVisible')[0].Threshold, 0);
  assert.equal(has('AWS/SQS', 'ApproximateAgeOfOldestMessage').length, 1);
  assert.equal(has('AWS/Lambda', 'Errors').length, 2);
  assert.equal(has('AWS/Lambda', 'Throttles').length, 2);
  assert.equal(has('AWS/ApiGateway', '5xx').length, 1);
  assert.equal(has('AWS/Bedrock', 'InvocationThrottles').length, 1);
  for (const a of alarms) assert.deepEqual(a.AlarmActions, [{ Ref: 'AlarmTopic' }]);
  template.resourceCountIs('AWS::Budgets::Budget', 1);
  template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
});

test('every platform route exists, the stage is throttled and logged', () => {
  const keys = Object.values(template.findResources('AWS::ApiGatewayV2::Route')).map((r) => r.Properties.RouteKey).sort();
  assert.deepEqual(keys, ROUTES.map(([, m, p]) => `${m} ${p}`).sort());
  template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
    DefaultRouteSettings: { ThrottlingBurstLimit: 200, ThrottlingRateLimit: 100 },
    AccessLogSettings: Match.objectLike({ DestinationArn: { 'Fn::GetAtt': ['ApiAccessLogGroup', 'Arn'] } }),
  });
  const outputs = Object.keys(template.toJSON().Outputs);
  for (const p of ['WhatsApp', 'Telegram', 'Slack', 'Twilio']) assert.ok(outputs.includes(`${p}WebhookUrl`));
});

test('cdk-nag AwsSolutions passes with every finding acknowledged with a reason', () => {
  const assembly = app.synth();
  const report = JSON.parse(require('fs').readFileSync(`${assembly.directory}/validation-report.json`, 'utf8'));
  const nag = report.pluginReports.find((p: { pluginName: string }) => p.pluginName === 'AwsSolutions');
  assert.equal(nag.conclusion, 'success', JSON.stringify(nag.violations, null, 1));
  assert.equal(nag.violations.length, 0);
  for (const s of nag.suppressedViolations) assert.ok(s.reason && s.reason.length > 20, s.ruleName);
});
