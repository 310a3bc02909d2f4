// Bridle's production stack in CDK: the same resources as infra/template.yaml (SAM), with the
// same logical ids, so infra/compare.py can check both describe one stack.

import * as path from 'path';
import {
  Aws,
  CfnCondition,
  CfnOutput,
  CfnParameter,
  CfnResource,
  Duration,
  Fn,
  RemovalPolicy,
  SecretValue,
  Stack,
  StackProps,
  Validations,
} from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as budgets from 'aws-cdk-lib/aws-budgets';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secrets from 'aws-cdk-lib/aws-secretsmanager';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { RustFunction } from 'cargo-lambda-cdk';
import { Construct } from 'constructs';
import { DASHBOARD_BODY } from './dashboard';

/** The worker's timeout; the queue's visibility timeout is 6x this (AWS's advice). */
export const WORKER_TIMEOUT_S = 300;
/** Receives before a job goes to the dead-letter queue. */
export const MAX_RECEIVE_COUNT = 5;
/** Days an attachment is kept in the media bucket. */
export const MEDIA_EXPIRY_DAYS = 90;
/** The webhook routes, one per platform (plus Meta's GET handshake). */
export const ROUTES: ReadonlyArray<[string, string, string]> = [
  ['WhatsApp', 'POST', '/webhooks/whatsapp'],
  ['WhatsAppHandshake', 'GET', '/webhooks/whatsapp'],
  ['Telegram', 'POST', '/webhooks/telegram'],
  ['Slack', 'POST', '/webhooks/slack'],
  ['Twilio', 'POST', '/webhooks/twilio'],
  ['Generic', 'POST', '/webhooks/generic'],
];
/** The HTTP API's base URL (the ApiUrl output), as an Fn::Sub string. */
const API_URL = 'https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}';
const ACCESS_LOG_FORMAT =
  '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","routeKey":"$context.routeKey","status":"$context.status","latency":"$context.responseLatency","integrationError":"$context.integrationErrorMessage"}';

export interface BridleStackProps extends StackProps {
  /** Lambda architecture; the bootstraps are built for it. */
  readonly architecture: lambda.Architecture;
  /**
   * A directory holding `webhook/bootstrap.zip` and `worker/bootstrap.zip` already built by
   * scripts/build-lambdas (CI builds them once); without it, RustFunction builds them with
   * cargo-lambda.
   */
  readonly prebuiltDir?: string;
}

export class BridleStack extends Stack {
  constructor(scope: Construct, id: string, props: BridleStackProps) {
    super(scope, id, props);
    const repoRoot = path.resolve(__dirname, '..', '..', '..', '..');

    // Parameters: the same names as the SAM template's.
    const param = (name: string, description: string, def: string) =>
      new CfnParameter(this, name, { type: 'String', default: def, description });
    const modelId = param('BedrockModelId', 'The Bedrock foundation model id the worker talks to.',
      'anthropic.claude-sonnet-4-5-20250929-v1:0');
    const profileId = param('BedrockInferenceProfileId',
      'A cross-region inference profile id for that model (e.g. us.<model id>), or empty.',
      'us.anthropic.claude-sonnet-4-5-20250929-v1:0');
    const publicBaseUrl = param('PublicBaseUrl',
      'The public https base URL of this stack (your custom domain), or empty. The worker\'s onboarding reply ' +
      'links to it (empty: the ApiUrl output). The webhook needs it only for Twilio, which signs the full ' +
      'public URL: set it to the ApiUrl output (or your domain) after the first deploy.', '');
    const telegramUser = param('TelegramBotUsername', "The Telegram bot's username; optional.", '');
    const maxConcurrency = new CfnParameter(this, 'WorkerMaxConcurrency', {
      type: 'Number', default: 10, minValue: 2, maxValue: 1000,
      description: 'Most worker instances the queue may drive at once.',
    });
    const caps: Record<string, CfnParameter> = {
      BRIDLE_CAP_USER_TOKENS_PER_MINUTE: param('BridleCapUserTokensPerMinute', 'BRIDLE_CAP_USER_TOKENS_PER_MINUTE; empty = default.', ''),
      BRIDLE_CAP_USER_TOKENS_PER_HOUR: param('BridleCapUserTokensPerHour', 'BRIDLE_CAP_USER_TOKENS_PER_HOUR; empty = default.', ''),
      BRIDLE_CAP_USER_USD_30D: param('BridleCapUserUsd30d', 'BRIDLE_CAP_USER_USD_30D; empty = default.', ''),
      BRIDLE_CAP_GLOBAL_USD_30D: param('BridleCapGlobalUsd30d', 'BRIDLE_CAP_GLOBAL_USD_30D; empty = default.', ''),
      BRIDLE_PRICES_FILE: param('BridlePricesFile', 'BRIDLE_PRICES_FILE; empty = built-in prices.', ''),
    };
    const budgetUsd = new CfnParameter(this, 'MonthlyBudgetUsd', {
      type: 'Number', default: 100, minValue: 1,
      description: 'The account-wide AWS Budgets backstop, in US dollars a month.',
    });
    const alarmEmail = param('AlarmEmail', 'An email address for alarms and budget alerts; optional.', '');

    const useProfile = new CfnCondition(this, 'UseInferenceProfile', {
      expression: Fn.conditionNot(Fn.conditionEquals(profileId.valueAsString, '')),
    });
    const hasPublicUrl = new CfnCondition(this, 'HasPublicBaseUrl', {
      expression: Fn.conditionNot(Fn.conditionEquals(publicBaseUrl.valueAsString, '')),
    });
    const hasEmail = new CfnCondition(this, 'HasAlarmEmail', {
      expression: Fn.conditionNot(Fn.conditionEquals(alarmEmail.valueAsString, '')),
    });
    const profileArn = Fn.sub(
      'arn:${AWS::Partition}:bedrock:${AWS::Region}:${AWS::AccountId}:inference-profile/${BedrockInferenceProfileId}');

    // Secrets: one JSON secret per function.
    const webhookSecrets = new secrets.Secret(this, 'WebhookSecrets', {
      description: 'Bridle webhook signing secrets (JSON): GENERIC_WEBHOOK_SECRET, WHATSAPP_APP_SECRET, ' +
        'WHATSAPP_VERIFY_TOKEN, TELEGRAM_SECRET_TOKEN, SLACK_SIGNING_SECRET, TWILIO_AUTH_TOKEN.',
      generateSecretString: {
        secretStringTemplate: '{}',
        generateStringKey: 'GENERIC_WEBHOOK_SECRET',
        passwordLength: 48,
        excludePunctuation: true,
      },
    });
    const workerSecrets = new secrets.Secret(this, 'WorkerSecrets', {
      description: 'Bridle reply credentials (JSON): WHATSAPP_ACCESS_TOKEN, WHATSAPP_PHONE_NUMBER_ID, ' +
        'TELEGRAM_BOT_TOKEN, SLACK_BOT_TOKEN, TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, ' +
        'GENERIC_CALLBACK_URL, GENERIC_CALLBACK_SECRET.',
      // Not a secret: the empty object the operator fills in after the first deploy.
      secretStringValue: SecretValue.unsafePlainText('{}'),
    });
    for (const s of [webhookSecrets, workerSecrets]) {
      Validations.of(s).acknowledge({
        id: 'AwsSolutions::AwsSolutions-SMG4',
        reason: 'Platform signing secrets and bot tokens are issued by the platforms; no Lambda can rotate them.',
      });
    }

    // Queue: FIFO, one group per conversation; DLQ after MAX_RECEIVE_COUNT receives.
    const dlq = new sqs.Queue(this, 'TurnDeadLetterQueue', {
      fifo: true,
      retentionPeriod: Duration.days(14),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    const queue = new sqs.Queue(this, 'TurnQueue', {
      fifo: true,
      contentBasedDeduplication: false,
      deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
      fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
      visibilityTimeout: Duration.seconds(6 * WORKER_TIMEOUT_S),
      retentionPeriod: Duration.days(4),
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      deadLetterQueue: { queue: dlq, maxReceiveCount: MAX_RECEIVE_COUNT },
    });
    const queuesPolicy = new sqs.QueuePolicy(this, 'TurnQueuesPolicy', { queues: [queue, dlq] });
    queuesPolicy.document.addStatements(new iam.PolicyStatement({
      sid: 'DenyInsecureTransport',
      effect: iam.Effect.DENY,
      // "*" principal and "sqs:*": the deny must cover everyone and every call made without TLS.
      principals: [new iam.AnyPrincipal()],
      actions: ['sqs:*'],
      resources: [queue.queueArn, dlq.queueArn],
      conditions: { Bool: { 'aws:SecureTransport': 'false' } },
    }));

    // Table: the layout of shared/store-dynamodb (create_table).
    const table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: 'ttl',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    table.addGlobalSecondaryIndex({
      indexName: 'gsi1',
      partitionKey: { name: 'gsi1pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'gsi1sk', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });
    table.addLocalSecondaryIndex({
      indexName: 'lsi1',
      sortKey: { name: 'lsi1sk', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });

    // Media: attachments by reference (s3://…/media/…), read by Bedrock. Private, encrypted,
    // TLS-only (the policy below, spelled out so SAM and CDK match), expired after 90 days.
    const mediaBucket = new s3.Bucket(this, 'MediaBucket', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      lifecycleRules: [{
        id: 'ExpireMedia',
        expiration: Duration.days(MEDIA_EXPIRY_DAYS),
        abortIncompleteMultipartUploadAfter: Duration.days(1),
      }],
      removalPolicy: RemovalPolicy.RETAIN,
    });
    const mediaPolicy = new s3.BucketPolicy(this, 'MediaBucketPolicy', { bucket: mediaBucket });
    mediaPolicy.document.addStatements(new iam.PolicyStatement({
      sid: 'DenyInsecureTransport',
      effect: iam.Effect.DENY,
      // "*" principal and "s3:*": the deny must cover everyone and every call made without TLS.
      principals: [new iam.AnyPrincipal()],
      actions: ['s3:*'],
      resources: [mediaBucket.bucketArn, `${mediaBucket.bucketArn}/*`],
      conditions: { Bool: { 'aws:SecureTransport': 'false' } },
    }));
    Validations.of(mediaBucket).acknowledge({
      id: 'AwsSolutions::AwsSolutions-S1',
      reason: 'Only the worker role touches the bucket (CloudTrail covers it); access logs would need a second bucket.',
    });

    // Logs: one group per function, one for API access logs.
    const logGroup = (id: string) => {
      const g = new logs.LogGroup(this, id, {
        retention: logs.RetentionDays.ONE_MONTH,
        removalPolicy: RemovalPolicy.DESTROY,
      });
      return g;
    };
    const webhookLogs = logGroup('WebhookLogGroup');
    const workerLogs = logGroup('WorkerLogGroup');
    const apiLogs = logGroup('ApiAccessLogGroup');

    // Roles: one per function, least privilege. No wildcard action; no wildcard resource except
    // the foundation-model region (see below).
    const lambdaPrincipal = new iam.ServicePrincipal('lambda.amazonaws.com');
    const logsStatement = (g: logs.LogGroup) => new iam.PolicyStatement({
      sid: 'Logs', actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [g.logGroupArn],
    });
    const webhookRole = new iam.Role(this, 'WebhookRole', {
      assumedBy: lambdaPrincipal,
      inlinePolicies: {
        webhook: new iam.PolicyDocument({
          statements: [
            logsStatement(webhookLogs),
            new iam.PolicyStatement({
              sid: 'Enqueue', actions: ['sqs:SendMessage', 'sqs:GetQueueAttributes'], resources: [queue.queueArn],
            }),
            new iam.PolicyStatement({
              sid: 'Secrets', actions: ['secretsmanager:GetSecretValue'], resources: [webhookSecrets.secretArn],
            }),
          ],
        }),
      },
    });
    const workerRole = new iam.Role(this, 'WorkerRole', {
      assumedBy: lambdaPrincipal,
      inlinePolicies: {
        worker: new iam.PolicyDocument({
          statements: [
            logsStatement(workerLogs),
            new iam.PolicyStatement({
              sid: 'Consume',
              actions: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueAttributes'],
              resources: [queue.queueArn],
            }),
            new iam.PolicyStatement({
              sid: 'Table',
              actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem',
                'dynamodb:Query', 'dynamodb:ConditionCheckItem'],
              resources: [table.tableArn, `${table.tableArn}/index/gsi1`, `${table.tableArn}/index/lsi1`],
            }),
            new iam.PolicyStatement({
              sid: 'Model',
              actions: ['bedrock:InvokeModelWithResponseStream'],
              resources: [
                // A cross-region inference profile routes to the model in several regions, so
                // the foundation-model grant names every region ("*" in the region field, as
                // AWS documents for inference profiles); without a profile, this region only.
                Fn.conditionIf(useProfile.logicalId,
                  Fn.sub('arn:${AWS::Partition}:bedrock:*::foundation-model/${BedrockModelId}'),
                  Fn.sub('arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${BedrockModelId}'),
                ).toString(),
                Fn.conditionIf(useProfile.logicalId, profileArn, Aws.NO_VALUE).toString(),
              ],
            }),
            new iam.PolicyStatement({
              sid: 'Secrets', actions: ['secretsmanager:GetSecretValue'], resources: [workerSecrets.secretArn],
            }),
            new iam.PolicyStatement({
              // Only the attachments' prefix (keys media/<channel>/<chat>/<message>/<n>).
              sid: 'Media', actions: ['s3:PutObject', 's3:GetObject'], resources: [`${mediaBucket.bucketArn}/media/*`],
            }),
          ],
        }),
      },
    });
    const modelArnFinding = JSON.stringify({ 'Fn::If': ['UseInferenceProfile',
      { 'Fn::Sub': 'arn:${AWS::Partition}:bedrock:*::foundation-model/${BedrockModelId}' },
      { 'Fn::Sub': 'arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/${BedrockModelId}' }] });
    Validations.of(workerRole).acknowledge({
      id: 'AwsSolutions::AwsSolutions-IAM5[Resource::<MediaBucket.Arn>/media/*]',
      reason: 'The worker writes and reads attachments under media/<channel>/<chat>/<message>/<n>, keys made per message.',
    });
    Validations.of(workerRole).acknowledge({
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::${modelArnFinding}]`,
      reason: 'bedrock:*::foundation-model/<model>: a cross-region inference profile invokes the model in ' +
        'whichever region it routes to, so the region field must be "*" (AWS requires it).',
    });

    // Functions.
    const common = {
      architecture: props.architecture,
      memorySize: 1024,
    };
    const rustFunction = (id: string, binary: string, rest: Omit<lambda.FunctionProps, 'code' | 'runtime' | 'handler'>) =>
      props.prebuiltDir
        ? new lambda.Function(this, id, {
          ...rest,
          runtime: lambda.Runtime.PROVIDED_AL2023,
          handler: 'bootstrap',
          code: lambda.Code.fromAsset(path.join(props.prebuiltDir, binary, 'bootstrap.zip')),
        })
        : new RustFunction(this, id, {
          ...rest,
          runtime: 'provided.al2023',
          manifestPath: path.join(repoRoot, 'Cargo.toml'),
          binaryName: binary,
        });
    const webhook = rustFunction('WebhookFunction', 'webhook', {
      ...common,
      description: 'Verify platform webhooks on the raw bytes and enqueue one turn job per message.',
      role: webhookRole,
      timeout: Duration.seconds(10),
      logGroup: webhookLogs,
      loggingFormat: lambda.LoggingFormat.TEXT,
      environment: {
        RUST_LOG: 'info',
        BRIDLE_METRICS_NAMESPACE: 'Bridle',
        QUEUE_URL: queue.queueUrl,
        BRIDLE_SECRETS_ARN: webhookSecrets.secretArn,
        PUBLIC_BASE_URL: publicBaseUrl.valueAsString,
        TELEGRAM_BOT_USERNAME: telegramUser.valueAsString,
      },
    });
    const worker = rustFunction('WorkerFunction', 'worker', {
      ...common,
      description: 'Run turn jobs from the FIFO queue in order and send the replies.',
      role: workerRole,
      timeout: Duration.seconds(WORKER_TIMEOUT_S),
      logGroup: workerLogs,
      loggingFormat: lambda.LoggingFormat.TEXT,
      environment: {
        RUST_LOG: 'info',
        BRIDLE_METRICS_NAMESPACE: 'Bridle',
        TABLE_NAME: table.tableName,
        BEDROCK_MODEL_ID: Fn.conditionIf(useProfile.logicalId, profileArn, modelId.valueAsString).toString(),
        // Where the onboarding reply sends people: PublicBaseUrl, else this stack's API.
        PUBLIC_BASE_URL: Fn.conditionIf(hasPublicUrl.logicalId, publicBaseUrl.valueAsString, Fn.sub(API_URL)).toString(),
        BRIDLE_SECRETS_ARN: workerSecrets.secretArn,
        BRIDLE_MEDIA_BUCKET: mediaBucket.bucketName,
        ...Object.fromEntries(Object.entries(caps).map(([k, p]) => [k, p.valueAsString])),
      },
    });
    const turns = new lambda.EventSourceMapping(this, 'WorkerFunctionTurns', {
      target: worker,
      eventSourceArn: queue.queueArn,
      batchSize: 5,
      reportBatchItemFailures: true,
      maxConcurrency: maxConcurrency.valueAsNumber,
    });

    // HTTP API: one route per platform webhook, throttled; access logs.
    const api = new apigw.HttpApi(this, 'HttpApi', {
      description: 'Bridle platform webhooks.',
      createDefaultStage: false,
    });
    const stage = new apigw.HttpStage(this, 'HttpApiApiGatewayDefaultStage', {
      httpApi: api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { burstLimit: 200, rateLimit: 100 },
    });
    const cfnStage = stage.node.defaultChild as apigw.CfnStage;
    cfnStage.accessLogSettings = { destinationArn: apiLogs.logGroupArn, format: ACCESS_LOG_FORMAT };
    const integration = new HttpLambdaIntegration('WebhookIntegration', webhook);
    for (const [, method, routePath] of ROUTES) {
      api.addRoutes({ path: routePath, methods: [method as apigw.HttpMethod], integration });
    }
    Validations.of(api).acknowledge({
      id: 'AwsSolutions::AwsSolutions-APIG4',
      reason: 'Platforms authenticate by signing each request; the webhook verifies the signature on the raw bytes.',
    });

    // Alarms -> SNS topic.
    const topic = new sns.Topic(this, 'AlarmTopic', { displayName: 'Bridle alarms' });
    const topicPolicy = new sns.TopicPolicy(this, 'AlarmTopicPolicy', { topics: [topic] });
    topicPolicy.document.addStatements(
      new iam.PolicyStatement({
        sid: 'BudgetsPublish',
        principals: [new iam.ServicePrincipal('budgets.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: { StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID } },
      }),
      new iam.PolicyStatement({
        sid: 'DenyInsecureTransport',
        effect: iam.Effect.DENY,
        // "*" principal: the deny applies to everyone publishing without TLS.
        principals: [new iam.AnyPrincipal()],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: { Bool: { 'aws:SecureTransport': 'false' } },
      }),
    );
    const subscription = new sns.CfnSubscription(this, 'AlarmEmailSubscription', {
      topicArn: topic.topicArn, protocol: 'email', endpoint: alarmEmail.valueAsString,
    });
    subscription.cfnOptions.condition = hasEmail;

    const alarm = (id: string, description: string, namespace: string, metricName: string,
      dimensions: cloudwatch.CfnAlarm.DimensionProperty[], statistic: string, period: number,
      evaluationPeriods: number, threshold: number) =>
      new cloudwatch.CfnAlarm(this, id, {
        alarmDescription: description, namespace, metricName, dimensions, statistic, period,
        evaluationPeriods, threshold, comparisonOperator: 'GreaterThanThreshold',
        treatMissingData: 'notBreaching', alarmActions: [topic.topicArn],
      });
    alarm('DeadLetterAlarm', 'A turn job failed 5 times and is in the dead-letter queue.', 'AWS/SQS',
      'ApproximateNumberOfMessagesVisible', [{ name: 'QueueName', value: dlq.queueName }], 'Maximum', 60, 1, 0);
    alarm('OldestMessageAlarm', 'The oldest turn job has waited over 5 minutes (the worker is behind or stuck).',
      'AWS/SQS', 'ApproximateAgeOfOldestMessage', [{ name: 'QueueName', value: queue.queueName }], 'Maximum', 60, 5, 300);
    const fnDims = (f: lambda.Function) => [{ name: 'FunctionName', value: f.functionName }];
    alarm('WebhookErrorsAlarm', 'The webhook function failed.', 'AWS/Lambda', 'Errors', fnDims(webhook), 'Sum', 300, 1, 0);
    alarm('WebhookThrottlesAlarm', 'The webhook function was throttled.', 'AWS/Lambda', 'Throttles', fnDims(webhook), 'Sum', 300, 1, 0);
    alarm('WorkerErrorsAlarm', 'The worker function failed.', 'AWS/Lambda', 'Errors', fnDims(worker), 'Sum', 300, 1, 0);
    alarm('WorkerThrottlesAlarm', 'The worker function was throttled.', 'AWS/Lambda', 'Throttles', fnDims(worker), 'Sum', 300, 1, 0);
    alarm('Api5xxAlarm', 'The webhook API answered 5xx (platforms will retry, then give up).', 'AWS/ApiGateway',
      '5xx', [{ name: 'ApiId', value: api.apiId }], 'Sum', 300, 1, 0);
    alarm('BedrockThrottlesAlarm', 'Bedrock throttled model calls (raise the quota or lower concurrency).',
      'AWS/Bedrock', 'InvocationThrottles',
      [{ name: 'ModelId', value: Fn.conditionIf(useProfile.logicalId, profileId.valueAsString, modelId.valueAsString).toString() }],
      'Sum', 300, 1, 0);

    // Dashboard: the same body as the SAM template's.
    new cloudwatch.CfnDashboard(this, 'Dashboard', { dashboardBody: Fn.sub(DASHBOARD_BODY) });

    // Budget: the account-wide backstop.
    const notification = (notificationType: string, threshold: number) => ({
      notification: { notificationType, comparisonOperator: 'GREATER_THAN', threshold, thresholdType: 'PERCENTAGE' },
      subscribers: [{ subscriptionType: 'SNS', address: topic.topicArn }],
    });
    new budgets.CfnBudget(this, 'Budget', {
      budget: {
        budgetType: 'COST',
        timeUnit: 'MONTHLY',
        budgetLimit: { amount: budgetUsd.valueAsNumber, unit: 'USD' },
      },
      notificationsWithSubscribers: [notification('ACTUAL', 80), notification('FORECASTED', 100)],
    });

    // The same logical ids as the SAM template.
    const ids: Array<[Construct, string]> = [
      [webhookSecrets, 'WebhookSecrets'], [workerSecrets, 'WorkerSecrets'],
      [queue, 'TurnQueue'], [dlq, 'TurnDeadLetterQueue'], [queuesPolicy, 'TurnQueuesPolicy'],
      [table, 'Table'], [mediaBucket, 'MediaBucket'], [mediaPolicy, 'MediaBucketPolicy'], [webhookLogs, 'WebhookLogGroup'], [workerLogs, 'WorkerLogGroup'],
      [apiLogs, 'ApiAccessLogGroup'], [webhookRole, 'WebhookRole'], [workerRole, 'WorkerRole'],
      [webhook, 'WebhookFunction'], [worker, 'WorkerFunction'], [turns, 'WorkerFunctionTurns'],
      [api, 'HttpApi'], [stage, 'HttpApiApiGatewayDefaultStage'], [topic, 'AlarmTopic'],
      [topicPolicy, 'AlarmTopicPolicy'],
    ];
    for (const [c, logicalId] of ids) {
      (c.node.defaultChild as CfnResource).overrideLogicalId(logicalId);
    }

    const apiUrl = API_URL;
    const out = (id: string, value: string, description?: string) => new CfnOutput(this, id, { value, description });
    out('ApiUrl', Fn.sub(apiUrl), "The webhook API's base URL (set PublicBaseUrl to it for Twilio).");
    out('WhatsAppWebhookUrl', Fn.sub(`${apiUrl}/webhooks/whatsapp`), 'Meta app dashboard -> WhatsApp -> Configuration -> Callback URL.');
    out('TelegramWebhookUrl', Fn.sub(`${apiUrl}/webhooks/telegram`), 'setWebhook url (with secret_token = TELEGRAM_SECRET_TOKEN).');
    out('SlackWebhookUrl', Fn.sub(`${apiUrl}/webhooks/slack`), 'Slack app -> Event Subscriptions -> Request URL, and Interactivity & Shortcuts -> Request URL.');
    out('TwilioWebhookUrl', Fn.sub(`${apiUrl}/webhooks/twilio`), 'Twilio number -> Messaging -> "A message comes in" webhook (HTTP POST).');
    out('GenericWebhookUrl', Fn.sub(`${apiUrl}/webhooks/generic`), 'The generic signed-JSON webhook.');
    out('WebhookSecretsArn', webhookSecrets.secretArn, 'Put the webhook signing secrets here (JSON object).');
    out('WorkerSecretsArn', workerSecrets.secretArn, 'Put the reply credentials here (JSON object).');
    out('TableName', table.tableName);
    out('MediaBucketName', mediaBucket.bucketName);
    out('QueueUrl', queue.queueUrl);
    out('DeadLetterQueueUrl', dlq.queueUrl);
    out('AlarmTopicArn', topic.topicArn);
    out('DashboardUrl', Fn.sub('https://console.aws.amazon.com/cloudwatch/home?region=${AWS::Region}#dashboards:name=${Dashboard}'));
  }
}
