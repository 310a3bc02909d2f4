// Assertion tests for the CDK stack: IAM policies, FIFO/DLQ wiring, the event source, alarms,
// the web function (URL, role, secret, no cycle), Cognito and its bring-your-own-issuer
// conditions, and cdk-nag clean. Asset bundling is skipped (no cargo build in a test).

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { Architecture } from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import {
  BridleStack, MAX_RECEIVE_COUNT, MEDIA_EXPIRY_DAYS, ROUTE_THROTTLES, ROUTES, SETTING_CONSTRAINTS, WEB_SECRET_KEYS, WEB_SECRET_NAME,
  WORKER_TIMEOUT_S,
} from '../lib/stack';

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
  // As deployed by default: EnableTracing=false drops the X-Ray statement (test/tracing.test.ts).
  return role.Properties.Policies.flatMap((p: { PolicyDocument: { Statement: Statement[] } }) => p.PolicyDocument.Statement)
    .filter((s: Statement & { 'Fn::If'?: unknown[] }) => s['Fn::If']?.[0] !== 'TracingEnabled');
}
const actions = (s: Statement) => (Array.isArray(s.Action) ? s.Action : [s.Action]);

test('each function has its own role, and no other IAM policy is attached', () => {
  const fns = template.findResources('AWS::Lambda::Function');
  assert.deepEqual(fns.WebhookFunction.Properties.Role, { 'Fn::GetAtt': ['WebhookRole', 'Arn'] });
  assert.deepEqual(fns.WorkerFunction.Properties.Role, { 'Fn::GetAtt': ['WorkerRole', 'Arn'] });
  assert.deepEqual(fns.WebFunction.Properties.Role, { 'Fn::GetAtt': ['WebRole', 'Arn'] });
  template.resourceCountIs('AWS::IAM::Policy', 0);
  template.resourceCountIs('AWS::IAM::Role', 3);
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

/** The web function URL without its trailing "/", as the template spells it. */
const WEB_BASE = {
  'Fn::Join': ['', ['https://', { 'Fn::Select': [2, { 'Fn::Split': ['/', { 'Fn::GetAtt': ['WebFunctionUrl', 'FunctionUrl'] }] }] }]],
};

test('the worker gets every variable its config requires; PUBLIC_BASE_URL is PublicBaseUrl, else the web app', () => {
  const vars = template.toJSON().Resources.WorkerFunction.Properties.Environment.Variables;
  for (const name of ['TABLE_NAME', 'BEDROCK_MODEL_ID', 'PUBLIC_BASE_URL', 'BRIDLE_SECRETS_ARN']) {
    assert.ok(vars[name], `${name} is set on the worker`);
  }
  assert.deepEqual(vars.PUBLIC_BASE_URL, { 'Fn::If': ['HasPublicBaseUrl', { Ref: 'PublicBaseUrl' }, WEB_BASE] });
  // The webhook has none: Twilio's signed URL is the one API Gateway says it was called at (the
  // web app's address, which the parameter is, would fail every SMS).
  const webhook = template.toJSON().Resources.WebhookFunction.Properties.Environment.Variables;
  assert.equal(webhook.PUBLIC_BASE_URL, undefined);
});

/** The optional settings the worker and the web function both read, and their parameters. */
const SHARED_SETTINGS: Record<string, string> = {
  BRIDLE_BUDGET_OUTPUT_ALLOWANCE: 'BridleBudgetOutputAllowance',
  BRIDLE_BUDGET_MIN_OUTPUT_TOKENS: 'BridleBudgetMinOutputTokens',
  BRIDLE_CAP_CONVERSATION_MESSAGES_PER_HOUR: 'BridleCapConversationMessagesPerHour',
  BRIDLE_MODEL_TIMEOUT_S: 'BridleModelTimeoutS',
  BRIDLE_MODEL_IDLE_TIMEOUT_S: 'BridleModelIdleTimeoutS',
  BRIDLE_MAX_OUTPUT_TOKENS: 'BridleMaxOutputTokens',
  BRIDLE_TEMPERATURE: 'BridleTemperature',
  BRIDLE_TOOL_CHOICE: 'BridleToolChoice',
  BRIDLE_REASONING_BUDGET_TOKENS: 'BridleReasoningBudgetTokens',
  BRIDLE_CONFIRMATION_TTL_S: 'BridleConfirmationTtlS',
  BRIDLE_SMS_USD_PER_SEGMENT: 'BridleSmsUsdPerSegment',
};

test('the model, confirmation, budget and lobby settings reach the functions from parameters that default to empty', () => {
  const json = template.toJSON();
  const worker = json.Resources.WorkerFunction.Properties.Environment.Variables;
  const web = json.Resources.WebFunction.Properties.Environment.Variables;
  for (const [name, parameter] of Object.entries(SHARED_SETTINGS)) {
    assert.deepEqual(worker[name], { Ref: parameter }, `${name} on the worker`);
    assert.deepEqual(web[name], { Ref: parameter }, `${name} on the web function`);
    // Empty is the built-in default: every parser reads a blank value as unset.
    assert.equal(json.Parameters[parameter].Default, '', parameter);
    assert.equal(json.Parameters[parameter].Type, 'String', parameter);
  }
  // Lobbies are the worker's alone (unknown senders write to the messaging channels).
  assert.deepEqual(worker.BRIDLE_LOBBY_RETENTION_DAYS, { Ref: 'BridleLobbyRetentionDays' });
  assert.equal(web.BRIDLE_LOBBY_RETENTION_DAYS, undefined);
  assert.equal(json.Parameters.BridleLobbyRetentionDays.Default, '');
  // none is refused on Bedrock, so the parameter does not offer it.
  assert.deepEqual(json.Parameters.BridleToolChoice.AllowedValues, ['', 'auto', 'required']);
  // BRIDLE_REASONING_EFFORT is refused on Bedrock: not passed.
  assert.equal(worker.BRIDLE_REASONING_EFFORT, undefined);
  assert.equal(web.BRIDLE_REASONING_EFFORT, undefined);
  for (const [parameter, constraint] of Object.entries(SETTING_CONSTRAINTS)) {
    const p = json.Parameters[parameter];
    assert.ok(p, `${parameter} is a parameter`);
    if (constraint.allowedPattern) assert.equal(p.AllowedPattern, constraint.allowedPattern, parameter);
  }
});

test('each setting parameter accepts empty and exactly the range the functions accept', () => {
  const accepts = (parameter: string, value: string) =>
    new RegExp(SETTING_CONSTRAINTS[parameter].allowedPattern!).test(value);
  const ranges: Array<[string, number, number]> = [
    ['BridleModelTimeoutS', 1, 900],
    ['BridleModelIdleTimeoutS', 1, 900],
    ['BridleMaxOutputTokens', 1, 1_000_000],
    ['BridleReasoningBudgetTokens', 1024, 999_999],
    ['BridleConfirmationTtlS', 1, 604_800],
    ['BridleLobbyRetentionDays', 1, 3650],
  ];
  for (const [parameter, low, high] of ranges) {
    assert.ok(accepts(parameter, ''), `${parameter}: empty`);
    for (let n = 0; n <= high + 10; n += n < 5000 ? 1 : 97) {
      assert.equal(accepts(parameter, String(n)), n >= low && n <= high, `${parameter}: ${n}`);
    }
    for (const n of [low, high, low - 1, high + 1]) {
      assert.equal(accepts(parameter, String(n)), n >= low && n <= high, `${parameter}: ${n}`);
    }
    for (const bad of ['ten', '1.5', '-1', ' 60', '60s']) assert.ok(!accepts(parameter, bad), `${parameter}: ${bad}`);
  }
  for (const ok of ['', '0', '0.2', '1', '1.25', '2', '2.0']) assert.ok(accepts('BridleTemperature', ok), ok);
  for (const bad of ['2.1', '3', '-0.5', 'warm', 'NaN']) assert.ok(!accepts('BridleTemperature', bad), bad);
  for (const parameter of ['BridleBudgetOutputAllowance', 'BridleBudgetMinOutputTokens']) {
    for (const ok of ['', '0', '16000', '16_000']) assert.ok(accepts(parameter, ok), `${parameter}: ${ok}`);
    for (const bad of ['lots', '-1', '1.5']) assert.ok(!accepts(parameter, bad), `${parameter}: ${bad}`);
  }
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
  assert.equal(has('AWS/Lambda', 'Errors').length, 3);
  assert.equal(has('AWS/Lambda', 'Throttles').length, 3);
  for (const metric of ['Errors', 'Throttles']) {
    assert.ok(has('AWS/Lambda', metric).some((a) => JSON.stringify(a.Dimensions) === JSON.stringify(
      [{ Name: 'FunctionName', Value: { Ref: 'WebFunction' } }])), `web ${metric}`);
  }
  assert.equal(has('AWS/ApiGateway', '5xx').length, 1);
  assert.equal(has('AWS/Bedrock', 'InvocationThrottles').length, 1);
  assert.deepEqual(has('Bridle', 'WebhookRejects').map((a) => a.Dimensions),
    [[{ Name: 'Reason', Value: 'queue_refused' }]], 'a message the queue refused for good');
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

test('every webhook route has its own throttle, so junk on one path cannot starve the others', () => {
  const [stage] = Object.values(template.findResources('AWS::ApiGatewayV2::Stage'));
  const settings = stage.Properties.RouteSettings;
  assert.deepEqual(Object.keys(settings).sort(), ROUTES.map(([, m, p]) => `${m} ${p}`).sort());
  for (const [key, t] of Object.entries(ROUTE_THROTTLES)) {
    assert.deepEqual(settings[key], { ThrottlingBurstLimit: t.burst, ThrottlingRateLimit: t.rate }, key);
    // Each route is below the API's default, and WhatsApp's handshake is barely open.
    assert.ok(t.rate <= 100 && t.burst <= 200, key);
  }
  assert.ok(ROUTE_THROTTLES['GET /webhooks/whatsapp'].rate <= 1);
  // The stage is created after the routes its settings name.
  const routeIds = Object.keys(template.findResources('AWS::ApiGatewayV2::Route'));
  for (const id of routeIds) assert.ok((stage.DependsOn ?? []).includes(id), `stage depends on ${id}`);
});

// ----- the web function, its secret and sign-in -----

const resources = () => template.toJSON().Resources;

test('the web function streams through a public function URL and is the WebAppUrl output', () => {
  const fn = resources().WebFunction.Properties;
  assert.equal(fn.Runtime, 'provided.al2023');
  assert.equal(fn.Handler, 'bootstrap');
  assert.deepEqual(fn.Architectures, ['arm64']);
  assert.deepEqual(fn.ReservedConcurrentExecutions,
    { 'Fn::If': ['HasWebReservedConcurrency', { Ref: 'WebReservedConcurrency' }, { Ref: 'AWS::NoValue' }] });
  template.resourceCountIs('AWS::Lambda::Url', 1);
  const url = resources().WebFunctionUrl.Properties;
  assert.equal(url.AuthType, 'NONE', 'the app signs people in itself');
  assert.equal(url.InvokeMode, 'RESPONSE_STREAM', 'tokens are streamed');
  assert.deepEqual(url.TargetFunctionArn, { 'Fn::GetAtt': ['WebFunction', 'Arn'] });
  // A public URL needs both grants, the second only through the URL.
  const perms = Object.values(template.findResources('AWS::Lambda::Permission'))
    .map((p) => p.Properties)
    .filter((p) => JSON.stringify(p.FunctionName).includes('WebFunction'));
  assert.deepEqual(perms.map((p) => [p.Action, p.Principal, p.FunctionUrlAuthType, p.InvokedViaFunctionUrl]).sort(), [
    ['lambda:InvokeFunction', '*', undefined, true],
    ['lambda:InvokeFunctionUrl', '*', 'NONE', undefined],
  ]);
  assert.deepEqual(template.toJSON().Outputs.WebAppUrl.Value, { 'Fn::GetAtt': ['WebFunctionUrl', 'FunctionUrl'] });
});

test('the web function gets exactly its environment contract, the secret by name', () => {
  const vars = resources().WebFunction.Properties.Environment.Variables;
  assert.deepEqual(Object.keys(vars).sort(), [
    'BEDROCK_MODEL_ID', 'BRIDLE_BUDGET_MIN_OUTPUT_TOKENS', 'BRIDLE_BUDGET_OUTPUT_ALLOWANCE',
    'BRIDLE_CAP_CONVERSATION_MESSAGES_PER_HOUR', 'BRIDLE_CAP_GLOBAL_USD_30D', 'BRIDLE_CAP_UNLINKED_USD_30D',
    'BRIDLE_CAP_USER_TOKENS_PER_HOUR',
    'BRIDLE_CAP_USER_TOKENS_PER_MINUTE', 'BRIDLE_CAP_USER_USD_30D', 'BRIDLE_CONFIRMATION_TTL_S',
    'BRIDLE_LINKABLE_CHANNELS', 'BRIDLE_MAX_OUTPUT_TOKENS', 'BRIDLE_METRICS_NAMESPACE',
    'BRIDLE_MODEL_IDLE_TIMEOUT_S', 'BRIDLE_MODEL_TIMEOUT_S', 'BRIDLE_PRICES_FILE', 'BRIDLE_REASONING_BUDGET_TOKENS',
    'BRIDLE_SECRETS_ARN', 'BRIDLE_SIGNUP', 'BRIDLE_SMS_USD_PER_SEGMENT', 'BRIDLE_TEMPERATURE', 'BRIDLE_TOOL_CHOICE',
    // Only with EnableTracing (test/tracing.test.ts).
    'OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_PROTOCOL', 'RUST_LOG',
    'TABLE_NAME', 'TELEGRAM_BOT_USERNAME', 'WHATSAPP_DISPLAY_NUMBER',
  ]);
  const worker = resources().WorkerFunction.Properties.Environment.Variables;
  assert.deepEqual(vars.BEDROCK_MODEL_ID, worker.BEDROCK_MODEL_ID, 'the same model as the worker');
  for (const cap of Object.keys(vars).filter((k) => k.startsWith('BRIDLE_CAP_') || k.startsWith('BRIDLE_BUDGET_')
    || k === 'BRIDLE_PRICES_FILE' || k in SHARED_SETTINGS)) {
    assert.deepEqual(vars[cap], worker[cap], `${cap} as the worker's`);
  }
  assert.deepEqual(vars.BRIDLE_SECRETS_ARN, { 'Fn::Sub': WEB_SECRET_NAME });
  assert.deepEqual(vars.BRIDLE_SIGNUP, { Ref: 'BridleSignup' });
  assert.deepEqual(vars.BRIDLE_LINKABLE_CHANNELS, { Ref: 'BridleLinkableChannels' });
  assert.deepEqual(resources().WebSecrets.Properties.Name, { 'Fn::Sub': WEB_SECRET_NAME });
});

test('the web role: the table, the model as the worker, its secret by name pattern, its logs', () => {
  const st = statements('WebRole');
  assert.ok(st.every((s) => s.Effect === 'Allow' && actions(s).every((a) => !a.includes('*'))), 'no wildcard action');
  assert.deepEqual(st.flatMap(actions).sort(), [
    'bedrock:InvokeModelWithResponseStream',
    'dynamodb:BatchGetItem', 'dynamodb:ConditionCheckItem', 'dynamodb:DeleteItem', 'dynamodb:GetItem',
    'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem',
    'logs:CreateLogStream', 'logs:PutLogEvents', 'secretsmanager:GetSecretValue',
  ]);
  const worker = statements('WorkerRole');
  for (const sid of ['Model', 'Table']) {
    assert.deepEqual(st.find((s) => s.Sid === sid), worker.find((s) => s.Sid === sid), `${sid} as the worker's`);
  }
  assert.deepEqual(st.find((s) => s.Sid === 'Logs')!.Resource, { 'Fn::GetAtt': ['WebLogGroup', 'Arn'] });
  assert.deepEqual(st.find((s) => s.Sid === 'Secrets')!.Resource, {
    'Fn::Sub': 'arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${AWS::StackName}-web-??????',
  });
});

/** Every resource a resource refers to (Ref, GetAtt, ${...} in Fn::Sub, DependsOn). */
function references(value: unknown, ids: Set<string>, out = new Set<string>()): Set<string> {
  if (Array.isArray(value)) {
    value.forEach((v) => references(v, ids, out));
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === 'Ref' && typeof v === 'string' && ids.has(v)) out.add(v);
      else if (k === 'Fn::GetAtt') out.add(Array.isArray(v) ? v[0] : String(v).split('.')[0]);
      else if (k === 'Fn::Sub') {
        const text = Array.isArray(v) ? v[0] : v;
        for (const m of String(text).matchAll(/\$\{([^}.!]+)[^}]*\}/g)) if (ids.has(m[1])) out.add(m[1]);
        if (Array.isArray(v)) references(v[1], ids, out);
      } else references(v, ids, out);
    }
  }
  return out;
}

test('no dependency cycle: the web function and its role never reference the web secret', () => {
  const all = resources();
  const ids = new Set(Object.keys(all));
  const edges = new Map<string, Set<string>>();
  for (const [id, r] of Object.entries(all) as Array<[string, { Properties?: unknown; DependsOn?: string | string[] }]>) {
    const refs = references(r.Properties, ids);
    for (const d of [r.DependsOn ?? []].flat()) refs.add(d);
    edges.set(id, refs);
  }
  assert.ok(!edges.get('WebFunction')!.has('WebSecrets'));
  assert.ok(!edges.get('WebRole')!.has('WebSecrets'));
  // The secret does depend on the client and the URL (that is why the function must not).
  assert.ok(edges.get('WebSecrets')!.has('UserPoolClient') && edges.get('WebSecrets')!.has('WebFunctionUrl'));
  // No cycle anywhere (depth-first search).
  const state = new Map<string, 'open' | 'done'>();
  const visit = (id: string, path: string[]) => {
    if (state.get(id) === 'done') return;
    assert.notEqual(state.get(id), 'open', `cycle: ${[...path, id].join(' -> ')}`);
    state.set(id, 'open');
    for (const next of edges.get(id) ?? []) visit(next, [...path, id]);
    state.set(id, 'done');
  };
  for (const id of ids) visit(id, []);
});

test('the web secret holds the four sign-in keys, from Cognito or from the bring-your-own parameters', () => {
  const [body, vars] = resources().WebSecrets.Properties.SecretString['Fn::Sub'];
  const keys = Object.keys(JSON.parse(body.replace(/\$\{(\w+)\}/g, 'x')));
  assert.deepEqual(keys, WEB_SECRET_KEYS);
  assert.deepEqual(vars.Issuer, { 'Fn::If': ['UseCognito',
    { 'Fn::Join': ['', ['https://', { 'Fn::GetAtt': ['UserPool', 'ProviderURL'] }]] }, { Ref: 'OidcIssuer' }] });
  assert.deepEqual(vars.ClientId, { 'Fn::If': ['UseCognito', { Ref: 'UserPoolClient' }, { Ref: 'OidcClientId' }] });
  assert.deepEqual(vars.ClientSecret, { 'Fn::If': ['UseCognito',
    { 'Fn::GetAtt': ['UserPoolClient', 'ClientSecret'] }, { Ref: 'OidcClientSecret' }] });
  assert.deepEqual(vars.PublicUrl, { 'Fn::If': ['HasPublicBaseUrl', { Ref: 'PublicBaseUrl' }, WEB_BASE] },
    'PublicBaseUrl when set (where the onboarding reply sends people to sign in), else the function URL without ' +
    'its trailing "/"');
  assert.equal(template.toJSON().Parameters.OidcClientSecret.NoEcho, true);
  // Encrypted like the other two: the AWS-managed key (no KmsKeyId).
  assert.equal(resources().WebSecrets.Properties.KmsKeyId, undefined);
});

test('Cognito exists only without OidcIssuer: pool, client and domain under UseCognito', () => {
  const json = template.toJSON();
  assert.deepEqual(json.Conditions.UseCognito, { 'Fn::Equals': [{ Ref: 'OidcIssuer' }, ''] });
  for (const type of ['AWS::Cognito::UserPool', 'AWS::Cognito::UserPoolClient', 'AWS::Cognito::UserPoolDomain']) {
    const found = Object.values(template.findResources(type));
    assert.equal(found.length, 1, type);
    assert.equal(found[0].Condition, 'UseCognito', `${type} is conditional`);
  }
  for (const [id, r] of Object.entries(json.Resources) as Array<[string, { Type: string; Condition?: string }]>) {
    if (r.Type.startsWith('AWS::Cognito::')) assert.equal(r.Condition, 'UseCognito', id);
  }
  // Every reference to a Cognito resource outside them sits in an Fn::If on UseCognito.
  const secret = JSON.stringify(json.Resources.WebSecrets.Properties.SecretString['Fn::Sub'][1]);
  assert.equal((secret.match(/UserPool/g) ?? []).length, (secret.match(/"UseCognito"/g) ?? []).length);
  assert.equal(json.Outputs.UserPoolId.Condition, 'UseCognito');
  assert.equal(json.Outputs.CognitoSignInDomain.Condition, 'UseCognito');
});

test('the user pool: e-mail usernames, verified, MFA required, sign-up by BridleSignup, kept on delete', () => {
  const pool = resources().UserPool;
  assert.equal(pool.DeletionPolicy, 'Retain');
  const p = pool.Properties;
  assert.deepEqual(p.UsernameAttributes, ['email']);
  assert.deepEqual(p.AutoVerifiedAttributes, ['email']);
  assert.equal(p.MfaConfiguration, 'ON');
  assert.deepEqual(p.EnabledMfas, ['SOFTWARE_TOKEN_MFA']);
  assert.ok(p.Policies.PasswordPolicy.MinimumLength >= 8);
  assert.deepEqual(p.AdminCreateUserConfig.AllowAdminCreateUserOnly, { 'Fn::If': ['SignupClosed', true, false] });
  assert.deepEqual(template.toJSON().Conditions.SignupClosed, { 'Fn::Equals': [{ Ref: 'BridleSignup' }, 'closed'] });
  assert.deepEqual(template.toJSON().Parameters.BridleSignup.AllowedValues, ['open', 'closed']);
});

test('PublicBaseUrl is an https origin (Cognito\'s callback is it and "/auth/callback")', () => {
  const pattern = new RegExp(template.toJSON().Parameters.PublicBaseUrl.AllowedPattern);
  for (const ok of ['', 'https://bridle.example.org', 'https://bridle.example.org:8443']) assert.ok(pattern.test(ok), ok);
  for (const bad of ['https://bridle.example.org/', 'http://bridle.example.org', 'bridle.example.org',
    'https://bridle.example.org?x=1', 'https://bridle.example.org/#', 'https://example.org/bridle']) {
    assert.ok(!pattern.test(bad), bad);
  }
});

test('the app client: confidential, code flow, openid email profile, callback at the web app\'s address', () => {
  const c = resources().UserPoolClient.Properties;
  assert.equal(c.GenerateSecret, true);
  assert.deepEqual(c.AllowedOAuthFlows, ['code']);
  assert.equal(c.AllowedOAuthFlowsUserPoolClient, true);
  assert.deepEqual(c.AllowedOAuthScopes, ['openid', 'email', 'profile']);
  const url = { 'Fn::GetAtt': ['WebFunctionUrl', 'FunctionUrl'] };
  // PublicBaseUrl when set: the same host as the web app's own URL (its login cookie's).
  const own = { Ref: 'PublicBaseUrl' };
  assert.deepEqual(c.CallbackURLs, [{ 'Fn::If': ['HasPublicBaseUrl',
    { 'Fn::Join': ['', [own, '/auth/callback']] }, { 'Fn::Join': ['', [url, 'auth/callback']] }] }]);
  assert.deepEqual(c.LogoutURLs, [{ 'Fn::If': ['HasPublicBaseUrl', { 'Fn::Join': ['', [own, '/']] }, url] }]);
  assert.deepEqual(c.SupportedIdentityProviders, ['COGNITO']);
  const domain = resources().UserPoolDomain.Properties;
  assert.deepEqual(domain.UserPoolId, { Ref: 'UserPool' });
  assert.equal(domain.Domain['Fn::If'][0], 'HasCognitoDomainPrefix');
});

test('cdk-nag AwsSolutions passes with every finding acknowledged with a reason', () => {
  const assembly = app.synth();
  const report = JSON.parse(require('fs').readFileSync(`${assembly.directory}/validation-report.json`, 'utf8'));
  const nag = report.pluginReports.find((p: { pluginName: string }) => p.pluginName === 'AwsSolutions');
  assert.equal(nag.conclusion, 'success', JSON.stringify(nag.violations, null, 1));
  assert.equal(nag.violations.length, 0);
  for (const s of nag.suppressedViolations) assert.ok(s.reason && s.reason.length > 20, s.ruleName);
});
