// Bridle's production stack in CDK: the same resources as infra/template.yaml (SAM), with the
// same logical ids, so infra/compare.py can check both describe one stack.

import * as path from 'path';
import {
  Aws,
  CfnCondition,
  CfnOutput,
  CfnParameter,
  CfnParameterProps,
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
import * as cognito from 'aws-cdk-lib/aws-cognito';
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

/** Whole seconds from 1 to 900 (the model timeouts). */
const SECONDS_1_900 = '^$|^([1-9][0-9]?|[1-8][0-9][0-9]|900)$';
/** A count cap (budget's config: up to 18 digits, `_` allowed between them, or `off` in any case). */
const COUNT_OR_OFF = '^$|^([0-9](_?[0-9]){0,17}|[oO][fF][fF])$';
/** A dollar cap (budget's `parse_usd`: an optional `$`, up to 13 whole digits and 6 decimals, or `off`). */
const USD_OR_OFF = '^$|^(\\$?([0-9]{1,13}(\\.[0-9]{0,6})?|\\.[0-9]{1,6})|[oO][fF][fF])$';
/**
 * What each optional setting's parameter accepts besides empty (the built-in default): the range
 * the functions accept (shared/assembly/src/model_settings.rs, engine's ConfirmationOptions,
 * channel-jobs' lobby retention, budget's config), so a value they would refuse at start-up is
 * refused at deploy instead. The same patterns are in template.yaml; compare.py checks they agree.
 */
export const SETTING_CONSTRAINTS: Record<string, Pick<CfnParameterProps, 'allowedPattern' | 'allowedValues' | 'constraintDescription'>> = {
  BridleCapUserTokensPerMinute: {
    allowedPattern: COUNT_OR_OFF,
    constraintDescription: 'must be empty, a whole number of tokens like 100000, or off.',
  },
  BridleCapUserTokensPerHour: {
    allowedPattern: COUNT_OR_OFF,
    constraintDescription: 'must be empty, a whole number of tokens like 1000000, or off.',
  },
  BridleCapUserUsd30d: {
    allowedPattern: USD_OR_OFF,
    constraintDescription: 'must be empty, a dollar amount like 20 or 12.50, or off.',
  },
  BridleCapGlobalUsd30d: {
    allowedPattern: USD_OR_OFF,
    constraintDescription: 'must be empty, a dollar amount like 500 or 1250.50, or off.',
  },
  BridleCapUnlinkedUsd30d: {
    allowedPattern: USD_OR_OFF,
    constraintDescription: 'must be empty, a dollar amount like 20 or 12.50, or off.',
  },
  BridleSmsUsdPerSegment: {
    allowedPattern: '^$|^\\$?([0-9]{1,13}(\\.[0-9]{0,6})?|\\.[0-9]{1,6})$',
    constraintDescription: 'must be empty or a dollar amount like 0.0083 (0 counts nothing).',
  },
  BridleCapConversationMessagesPerHour: {
    allowedPattern: COUNT_OR_OFF,
    constraintDescription: 'must be empty, a whole number of messages like 60, or off.',
  },
  BridleBudgetOutputAllowance: {
    allowedPattern: '^$|^[0-9][0-9_]*$',
    constraintDescription: 'must be empty or a whole number of tokens, like 16000.',
  },
  BridleBudgetMinOutputTokens: {
    allowedPattern: '^$|^[0-9][0-9_]*$',
    constraintDescription: 'must be empty or a whole number of tokens, like 1000.',
  },
  BridleModelTimeoutS: {
    allowedPattern: SECONDS_1_900,
    constraintDescription: 'must be empty or a whole number of seconds from 1 to 900.',
  },
  BridleModelIdleTimeoutS: {
    allowedPattern: SECONDS_1_900,
    constraintDescription: 'must be empty or a whole number of seconds from 1 to 900.',
  },
  BridleMaxOutputTokens: {
    allowedPattern: '^$|^([1-9][0-9]{0,5}|1000000)$',
    constraintDescription: 'must be empty or a whole number of tokens from 1 to 1000000.',
  },
  BridleTemperature: {
    allowedPattern: '^$|^([01](\\.[0-9]+)?|2(\\.0+)?)$',
    constraintDescription: 'must be empty or a number from 0 to 2, like 0.2.',
  },
  BridleToolChoice: { allowedValues: ['', 'auto', 'required'] },
  BridleReasoningBudgetTokens: {
    allowedPattern: '^$|^(102[4-9]|10[3-9][0-9]|1[1-9][0-9][0-9]|[2-9][0-9]{3}|[1-9][0-9]{4,5})$',
    constraintDescription: 'must be empty or a whole number of tokens from 1024, below the output allowance.',
  },
  BridleConfirmationTtlS: {
    allowedPattern: '^$|^([1-9][0-9]{0,4}|[1-5][0-9]{5}|60[0-3][0-9]{3}|604[0-7][0-9]{2}|604800)$',
    constraintDescription: 'must be empty or a whole number of seconds from 1 to 604800 (7 days).',
  },
  BridleLobbyRetentionDays: {
    allowedPattern: '^$|^([1-9][0-9]{0,2}|[12][0-9]{3}|3[0-5][0-9]{2}|36[0-4][0-9]|3650)$',
    constraintDescription: 'must be empty or a whole number of days from 1 to 3650.',
  },
};

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
/**
 * Each webhook route's own throttle (requests per second, burst), by route key, so junk posted
 * to one path cannot use up the others' rate (with one shared limit it starved every platform).
 * A throttled request gets 429 before any Lambda runs. Sized by what each platform sends and
 * does with a 429 (the same reasoning is in template.yaml):
 * - WhatsApp POST 50/s, burst 100: user messages plus up to three status updates per reply; a
 *   Cloud API number sends 80 messages/s by default; Meta retries a refused delivery with backoff
 *   for up to 7 days, so a burst past the limit is delayed, not lost.
 * - WhatsApp GET 1/s, burst 5: only the verification handshake.
 * - Telegram 40/s, burst 40: at most max_connections (setWebhook, default 40) at once; an
 *   undelivered update is kept and retried for up to 24 hours.
 * - Slack 10/s, burst 50: at most 30,000 events per workspace and app an hour (8.3/s); a failed
 *   event is retried 3 times (at once, after 1 and after 5 minutes).
 * - Twilio 10/s, burst 20: SMS arrive at people's typing pace; Twilio does NOT retry a refused
 *   request (only a failed connection, once), so this is well above real traffic.
 * - Generic 20/s, burst 40: your own system; raise it to what it sends.
 * The web app is a function URL, not on this API: WebReservedConcurrency caps it.
 */
export const ROUTE_THROTTLES: Record<string, { burst: number; rate: number }> = {
  'POST /webhooks/whatsapp': { burst: 100, rate: 50 },
  'GET /webhooks/whatsapp': { burst: 5, rate: 1 },
  'POST /webhooks/telegram': { burst: 40, rate: 40 },
  'POST /webhooks/slack': { burst: 50, rate: 10 },
  'POST /webhooks/twilio': { burst: 20, rate: 10 },
  'POST /webhooks/generic': { burst: 40, rate: 20 },
};
/** Why the webhook secret is not rotated on a schedule (the same reason is in template.yaml). */
const WEBHOOK_SECRETS_NOT_ROTATED =
  'Each value only works while the other side holds the same one, so none is rotated on a schedule. ' +
  'WHATSAPP_APP_SECRET, SLACK_SIGNING_SECRET and TWILIO_AUTH_TOKEN are issued by the platforms: rotate them ' +
  'in the platform\'s console, then put them here. WHATSAPP_VERIFY_TOKEN and TELEGRAM_SECRET_TOKEN are chosen ' +
  'by the operator and registered with the platform (Meta\'s webhook settings, Telegram\'s setWebhook): a new ' +
  'value must be registered there at the same time. GENERIC_WEBHOOK_SECRET is generated by this stack, but the ' +
  'system posting to /webhooks/generic signs with it: give that system a new value when you change it.';
/** The web function's timeout (a streamed turn runs inside one request). */
export const WEB_TIMEOUT_S = 300;
/** The keys of the web secret the stack fills in (the web function's sign-in settings). */
export const WEB_SECRET_KEYS = ['BRIDLE_OIDC_ISSUER', 'BRIDLE_OIDC_CLIENT_ID', 'BRIDLE_OIDC_CLIENT_SECRET', 'BRIDLE_PUBLIC_URL'];
/**
 * The web secret's name, an Fn::Sub string: the web function gets this name (and its role a grant
 * on the name's ARN pattern), never a reference to the secret, which would be a cycle.
 */
export const WEB_SECRET_NAME = '${AWS::StackName}-web';
/** The HTTP API's base URL (the ApiUrl output), as an Fn::Sub string. */
const API_URL = 'https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}';
const ACCESS_LOG_FORMAT =
  '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","routeKey":"$context.routeKey","status":"$context.status","latency":"$context.responseLatency","integrationError":"$context.integrationErrorMessage"}';

export interface BridleStackProps extends StackProps {
  /** Lambda architecture; the bootstraps are built for it. */
  readonly architecture: lambda.Architecture;
  /**
   * A directory holding `webhook/`, `worker/` and `web/bootstrap.zip` already built by
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
    // A setting whose empty default is the built-in one, held to what the functions accept.
    const setting = (name: string, description: string) =>
      new CfnParameter(this, name, { type: 'String', default: '', description, ...SETTING_CONSTRAINTS[name] });
    const modelId = param('BedrockModelId', 'The Bedrock foundation model id the worker talks to.',
      'anthropic.claude-sonnet-4-5-20250929-v1:0');
    const profileId = param('BedrockInferenceProfileId',
      'A cross-region inference profile id for that model (e.g. us.<model id>), or empty.',
      'us.anthropic.claude-sonnet-4-5-20250929-v1:0');
    // An https origin, no path: Cognito's callback is this and "/auth/callback", the web app
    // sends its own URL without a "/" at the end, and serves its routes from the root.
    const publicBaseUrlPattern = '^$|^https://[^/?#\\s]+$';
    const publicBaseUrl = new CfnParameter(this, 'PublicBaseUrl', {
      type: 'String', default: '', allowedPattern: publicBaseUrlPattern,
      constraintDescription: 'an https origin with nothing after the host (https://bridle.example.org), or empty',
      description:
      'The public https base URL of the web app (your custom domain, serving the web function), or empty. The ' +
      'worker\'s onboarding reply links to it, and people sign in there (Cognito\'s callback and the web app\'s ' +
      'own URL are set to it; empty: the WebAppUrl output, the web function\'s URL). The webhook does not use it: ' +
      'Twilio\'s signature is checked against the URL API Gateway says it was called at.',
    });
    // Held to what the functions accept at start-up (infra/parameter_samples.json).
    const telegramUser = new CfnParameter(this, 'TelegramBotUsername', {
      type: 'String', default: '', description: "The Telegram bot's username; optional.",
      allowedPattern: '^$|^@?[A-Za-z0-9_]{5,32}$',
      constraintDescription: 'a Telegram username, 5-32 characters of letters, digits and _ (bridlebot), or empty',
    });
    const whatsappNumber = new CfnParameter(this, 'WhatsAppDisplayNumber', {
      type: 'String', default: '',
      description: 'The WhatsApp number people message (e.g. +15551234567), shown next to a link code; optional.',
      allowedPattern: '^$|^[-+ ().]*[0-9][-+ ().0-9]*$',
      constraintDescription: 'a phone number with country code (+15551234567 or +1 (555) 123-4567), or empty',
    });
    const linkable = new CfnParameter(this, 'BridleLinkableChannels', {
      type: 'String', default: '',
      description: 'BRIDLE_LINKABLE_CHANNELS: the messaging apps a user may link, comma-separated (e.g. whatsapp,telegram).',
      allowedPattern: '(?i)^ *(whatsapp|telegram|slack|twilio|generic)? *(, *(whatsapp|telegram|slack|twilio|generic)? *)*$',
      constraintDescription: 'channel names from whatsapp, telegram, slack, twilio and generic, comma-separated, or empty',
    });
    const signup = new CfnParameter(this, 'BridleSignup', {
      type: 'String', default: 'closed', allowedValues: ['open', 'closed'],
      description: 'BRIDLE_SIGNUP and Cognito self sign-up: open, or closed (only people you add).',
    });
    const oidcIssuer = param('OidcIssuer',
      'Bring your own OpenID Connect issuer instead of Cognito; empty: this stack\'s Cognito user pool.', '');
    const oidcClientId = param('OidcClientId', 'With OidcIssuer, the web app\'s client id at that issuer.', '');
    const oidcClientSecret = new CfnParameter(this, 'OidcClientSecret', {
      type: 'String', default: '', noEcho: true,
      description: 'With OidcIssuer, the web app\'s client secret at that issuer (empty for a public client).',
    });
    const domainPrefix = new CfnParameter(this, 'CognitoDomainPrefix', {
      type: 'String', default: '', allowedPattern: '^$|^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$',
      description: 'The Cognito sign-in domain prefix; empty: <stack name>-<8 characters of the stack id>.',
    });
    const webConcurrency = new CfnParameter(this, 'WebReservedConcurrency', {
      type: 'Number', default: 0, minValue: 0, maxValue: 1000,
      description: 'Concurrency reserved for (and capping) the web function; 0: none reserved, no cap.',
    });
    const maxConcurrency = new CfnParameter(this, 'WorkerMaxConcurrency', {
      type: 'Number', default: 10, minValue: 2, maxValue: 1000,
      description: 'Most worker instances the queue may drive at once.',
    });
    const caps: Record<string, CfnParameter> = {
      BRIDLE_CAP_USER_TOKENS_PER_MINUTE: setting('BridleCapUserTokensPerMinute', 'BRIDLE_CAP_USER_TOKENS_PER_MINUTE; empty = default.'),
      BRIDLE_CAP_USER_TOKENS_PER_HOUR: setting('BridleCapUserTokensPerHour', 'BRIDLE_CAP_USER_TOKENS_PER_HOUR; empty = default.'),
      BRIDLE_CAP_USER_USD_30D: setting('BridleCapUserUsd30d', 'BRIDLE_CAP_USER_USD_30D; empty = default.'),
      BRIDLE_CAP_GLOBAL_USD_30D: setting('BridleCapGlobalUsd30d', 'BRIDLE_CAP_GLOBAL_USD_30D; empty = default.'),
      BRIDLE_CAP_UNLINKED_USD_30D: setting('BridleCapUnlinkedUsd30d',
        'BRIDLE_CAP_UNLINKED_USD_30D, what replies to senders not linked yet (the onboarding SMS) may cost in 30 days; empty = the built-in default (20).'),
      BRIDLE_PRICES_FILE: param('BridlePricesFile', 'BRIDLE_PRICES_FILE; empty = built-in prices.', ''),
      BRIDLE_SMS_USD_PER_SEGMENT: setting('BridleSmsUsdPerSegment',
        "BRIDLE_SMS_USD_PER_SEGMENT, what one SMS segment of a reply costs, counted in the dollar caps; empty = the built-in default (0.0083, Twilio's US price)."),
      BRIDLE_CAP_CONVERSATION_MESSAGES_PER_HOUR: setting('BridleCapConversationMessagesPerHour',
        'BRIDLE_CAP_CONVERSATION_MESSAGES_PER_HOUR: user messages per conversation per hour, or off; empty = default (60).'),
      BRIDLE_BUDGET_OUTPUT_ALLOWANCE: setting('BridleBudgetOutputAllowance',
        'BRIDLE_BUDGET_OUTPUT_ALLOWANCE: the most output tokens one call is given and reserved for; empty = default (16000).'),
      BRIDLE_BUDGET_MIN_OUTPUT_TOKENS: setting('BridleBudgetMinOutputTokens',
        'BRIDLE_BUDGET_MIN_OUTPUT_TOKENS: below this much room for output, a call is refused; empty = default (1000).'),
    };
    // The model-call settings (shared/assembly/src/model_settings.rs) and the confirmation window,
    // the same for the worker and the web function.
    const modelSettings: Record<string, CfnParameter> = {
      BRIDLE_MODEL_TIMEOUT_S: setting('BridleModelTimeoutS',
        'BRIDLE_MODEL_TIMEOUT_S: one model call, opening and streaming, 1-900 s (the functions stop after 300 s); ' +
        'empty = default (60).'),
      BRIDLE_MODEL_IDLE_TIMEOUT_S: setting('BridleModelIdleTimeoutS',
        'BRIDLE_MODEL_IDLE_TIMEOUT_S: the longest silence in a call, 1-900 s, at most the call timeout; empty = default (20).'),
      BRIDLE_MAX_OUTPUT_TOKENS: setting('BridleMaxOutputTokens',
        'BRIDLE_MAX_OUTPUT_TOKENS: a call\'s output allowance, 1-1000000; empty = default (16000).'),
      BRIDLE_TEMPERATURE: setting('BridleTemperature',
        'BRIDLE_TEMPERATURE: 0 to 2 (e.g. 0.2); empty = the model provider\'s default.'),
      BRIDLE_TOOL_CHOICE: setting('BridleToolChoice',
        'BRIDLE_TOOL_CHOICE: auto, or required (a tool call on each user message); none is not available on Bedrock. ' +
        'Empty = default (auto).'),
      BRIDLE_REASONING_BUDGET_TOKENS: setting('BridleReasoningBudgetTokens',
        'BRIDLE_REASONING_BUDGET_TOKENS: Bedrock\'s thinking budget, 1024 or more and below the output allowance; empty = none.'),
      BRIDLE_CONFIRMATION_TTL_S: setting('BridleConfirmationTtlS',
        'BRIDLE_CONFIRMATION_TTL_S: how long a held risky call may be confirmed, 1-604800 s; empty = default (3600).'),
    };
    const lobbyRetention = setting('BridleLobbyRetentionDays',
      'BRIDLE_LOBBY_RETENTION_DAYS (worker): days an unlinked sender\'s messages are kept, 1-3650; empty = default (30).');
    const budgetUsd = new CfnParameter(this, 'MonthlyBudgetUsd', {
      type: 'Number', default: 100, minValue: 1,
      description: 'The account-wide AWS Budgets backstop, in US dollars a month.',
    });
    const alarmEmail = param('AlarmEmail', 'An email address for alarms and budget alerts; optional.', '');
    const enableTracing = new CfnParameter(this, 'EnableTracing', {
      type: 'String', default: 'false', allowedValues: ['false', 'true'],
      description: 'true: traces to AWS X-Ray through the ADOT collector layer (OTLP on localhost:4318); false: none of it.',
    });
    const adotLayerArn = new CfnParameter(this, 'AdotCollectorLayerArn', {
      type: 'String', default: '',
      allowedPattern: '^$|^arn:[a-z-]+:lambda:[a-z0-9-]+:[0-9]{12}:layer:[A-Za-z0-9_-]+:[0-9]+$',
      constraintDescription: 'must be empty or a Lambda layer version ARN.',
      description: 'With EnableTracing, the ADOT collector layer version ARN; empty: AWS\'s ' +
        'aws-otel-collector-<arm64|amd64>-ver-0-102-1:1 for this region and architecture.',
    });

    const useProfile = new CfnCondition(this, 'UseInferenceProfile', {
      expression: Fn.conditionNot(Fn.conditionEquals(profileId.valueAsString, '')),
    });
    const hasPublicUrl = new CfnCondition(this, 'HasPublicBaseUrl', {
      expression: Fn.conditionNot(Fn.conditionEquals(publicBaseUrl.valueAsString, '')),
    });
    const hasEmail = new CfnCondition(this, 'HasAlarmEmail', {
      expression: Fn.conditionNot(Fn.conditionEquals(alarmEmail.valueAsString, '')),
    });
    // No OidcIssuer: this stack's Cognito user pool is the issuer.
    const useCognito = new CfnCondition(this, 'UseCognito', {
      expression: Fn.conditionEquals(oidcIssuer.valueAsString, ''),
    });
    const signupClosed = new CfnCondition(this, 'SignupClosed', {
      expression: Fn.conditionEquals(signup.valueAsString, 'closed'),
    });
    const hasDomainPrefix = new CfnCondition(this, 'HasCognitoDomainPrefix', {
      expression: Fn.conditionNot(Fn.conditionEquals(domainPrefix.valueAsString, '')),
    });
    const hasWebConcurrency = new CfnCondition(this, 'HasWebReservedConcurrency', {
      expression: Fn.conditionNot(Fn.conditionEquals(webConcurrency.value, 0)),
    });
    const tracing = new CfnCondition(this, 'TracingEnabled', {
      expression: Fn.conditionEquals(enableTracing.valueAsString, 'true'),
    });
    const hasAdotLayerArn = new CfnCondition(this, 'HasAdotCollectorLayerArn', {
      expression: Fn.conditionNot(Fn.conditionEquals(adotLayerArn.valueAsString, '')),
    });
    // The ADOT collector layer: the one given, else AWS's for this region and the functions'
    // architecture (AWS names x86_64 "amd64" in these layers). Only with EnableTracing.
    const adotArch = props.architecture.name === lambda.Architecture.ARM_64.name ? 'arm64' : 'amd64';
    const adotLayer = Fn.conditionIf(hasAdotLayerArn.logicalId, adotLayerArn.valueAsString, Fn.sub(
      `arn:\${AWS::Partition}:lambda:\${AWS::Region}:901920570463:layer:aws-otel-collector-${adotArch}-ver-0-102-1:1`));
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
        reason: s === webhookSecrets ? WEBHOOK_SECRETS_NOT_ROTATED
          : 'Bot tokens and API credentials are issued by the platforms (rotate them in the platform\'s console, ' +
            'then here); the generic callback secret is shared with the system receiving the replies.',
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
    const webLogs = logGroup('WebLogGroup');
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
    // The same model grant for the worker and the web function.
    const modelStatement = () => new iam.PolicyStatement({
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
    });
    // Items, batch reads, queries and transactions (TransactWriteItems is authorised by the item
    // actions, ConditionCheckItem included; BatchGetItem is its own action), on the table and
    // its indexes. infra/test_iam_covers_code.py checks the code needs no more.
    const tableStatement = () => new iam.PolicyStatement({
      sid: 'Table',
      actions: ['dynamodb:GetItem', 'dynamodb:BatchGetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem',
        'dynamodb:DeleteItem', 'dynamodb:Query', 'dynamodb:ConditionCheckItem'],
      resources: [table.tableArn, `${table.tableArn}/index/gsi1`, `${table.tableArn}/index/lsi1`],
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
            tableStatement(),
            modelStatement(),
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

    // The web function's role. Its secret is named, not referenced (see WEB_SECRET_NAME below):
    // a reference would close the cycle function -> secret -> client -> function URL -> function.
    const webSecretArnPattern =
      'arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${AWS::StackName}-web-??????';
    const webRole = new iam.Role(this, 'WebRole', {
      assumedBy: lambdaPrincipal,
      inlinePolicies: {
        web: new iam.PolicyDocument({
          statements: [
            logsStatement(webLogs),
            tableStatement(),
            modelStatement(),
            new iam.PolicyStatement({
              // "??????": the six random characters Secrets Manager appends to the name.
              sid: 'Secrets', actions: ['secretsmanager:GetSecretValue'], resources: [Fn.sub(webSecretArnPattern)],
            }),
          ],
        }),
      },
    });
    Validations.of(webRole).acknowledge({
      id: `AwsSolutions::AwsSolutions-IAM5[Resource::${modelArnFinding}]`,
      reason: 'bedrock:*::foundation-model/<model>: a cross-region inference profile invokes the model in ' +
        'whichever region it routes to, so the region field must be "*" (AWS requires it).',
    });
    Validations.of(webRole).acknowledge({
      id: 'AwsSolutions::AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:<AWS::StackName>-web-??????]',
      reason: 'The web secret by its name plus the six characters Secrets Manager appends: a reference to the ' +
        'secret would be a dependency cycle (the secret holds the function URL).',
    });

    // X-Ray, with EnableTracing: PutTraceSegments and PutTelemetryRecords take no resource-level
    // permissions, so "*" is the only resource they accept.
    const tracesStatement = Fn.conditionIf(tracing.logicalId, {
      Sid: 'Traces', Effect: 'Allow', Action: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'], Resource: '*',
    }, Aws.NO_VALUE);
    for (const [role, statementCount] of [[webhookRole, 3], [workerRole, 6], [webRole, 4]] as const) {
      (role.node.defaultChild as iam.CfnRole).addPropertyOverride(`Policies.0.PolicyDocument.Statement.${statementCount}`, tracesStatement);
    }
    // Traces (EnableTracing): OTLP to the ADOT collector layer, which sends them to X-Ray.
    const tracingEnv = {
      OTEL_EXPORTER_OTLP_ENDPOINT: Fn.conditionIf(tracing.logicalId, 'http://localhost:4318', Aws.NO_VALUE).toString(),
      OTEL_EXPORTER_OTLP_PROTOCOL: Fn.conditionIf(tracing.logicalId, 'http/protobuf', Aws.NO_VALUE).toString(),
    };

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
        TELEGRAM_BOT_USERNAME: telegramUser.valueAsString,
        ...tracingEnv,
      },
    });
    // The web app: the same router as `bridle serve`. A function URL with response streaming (API
    // Gateway's HTTP API does not stream); AuthType NONE: a browser app signs people in itself
    // (OpenID Connect, session cookie, CSRF token), IAM auth would need SigV4-signed requests.
    const web = rustFunction('WebFunction', 'web', {
      ...common,
      description: 'The web app - chat with streamed replies, sign-in, link codes, panels, budgets.',
      role: webRole,
      timeout: Duration.seconds(WEB_TIMEOUT_S),
      logGroup: webLogs,
      loggingFormat: lambda.LoggingFormat.TEXT,
      environment: {
        RUST_LOG: 'info',
        BRIDLE_METRICS_NAMESPACE: 'Bridle',
        TABLE_NAME: table.tableName,
        BEDROCK_MODEL_ID: Fn.conditionIf(useProfile.logicalId, profileArn, modelId.valueAsString).toString(),
        // The web secret's name, not a reference (see webRole); Secrets Manager takes either.
        BRIDLE_SECRETS_ARN: Fn.sub(WEB_SECRET_NAME),
        BRIDLE_SIGNUP: signup.valueAsString,
        ...Object.fromEntries(Object.entries(caps).map(([k, p]) => [k, p.valueAsString])),
        ...Object.fromEntries(Object.entries(modelSettings).map(([k, p]) => [k, p.valueAsString])),
        WHATSAPP_DISPLAY_NUMBER: whatsappNumber.valueAsString,
        TELEGRAM_BOT_USERNAME: telegramUser.valueAsString,
        BRIDLE_LINKABLE_CHANNELS: linkable.valueAsString,
        ...tracingEnv,
      },
    });
    (web.node.defaultChild as lambda.CfnFunction).addPropertyOverride('ReservedConcurrentExecutions',
      Fn.conditionIf(hasWebConcurrency.logicalId, webConcurrency.value, Aws.NO_VALUE));
    for (const fn of [webhook, web]) {
      (fn.node.defaultChild as lambda.CfnFunction).addPropertyOverride('Layers',
        [Fn.conditionIf(tracing.logicalId, adotLayer, Aws.NO_VALUE)]);
    }
    const webUrl = web.addFunctionUrl({
      authType: lambda.FunctionUrlAuthType.NONE,
      invokeMode: lambda.InvokeMode.RESPONSE_STREAM,
    });
    // The function URL ends with "/"; the app and the onboarding link want the base without it.
    const webBase = Fn.join('', ['https://', Fn.select(2, Fn.split('/', webUrl.url))]);

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
        // Where the onboarding reply sends people: PublicBaseUrl, else the web app.
        PUBLIC_BASE_URL: Fn.conditionIf(hasPublicUrl.logicalId, publicBaseUrl.valueAsString, webBase).toString(),
        BRIDLE_SECRETS_ARN: workerSecrets.secretArn,
        BRIDLE_MEDIA_BUCKET: mediaBucket.bucketName,
        ...Object.fromEntries(Object.entries(caps).map(([k, p]) => [k, p.valueAsString])),
        ...Object.fromEntries(Object.entries(modelSettings).map(([k, p]) => [k, p.valueAsString])),
        BRIDLE_LOBBY_RETENTION_DAYS: lobbyRetention.valueAsString,
        ...tracingEnv,
      },
    });
    (worker.node.defaultChild as lambda.CfnFunction).addPropertyOverride('Layers',
      [Fn.conditionIf(tracing.logicalId, adotLayer, Aws.NO_VALUE)]);
    const emptyLayerDefault = {
      id: 'CloudFormation-Validate::W1030',
      reason: 'The empty AdotCollectorLayerArn default never reaches Layers: HasAdotCollectorLayerArn picks ' +
        'AWS\'s collector layer for this region then, and without EnableTracing there is no layer at all.',
    };
    for (const fn of [webhook, web, worker]) Validations.of(fn).acknowledge(emptyLayerDefault);
    // The same finding, reported on the parameter (the stack) as well as on each function.
    Validations.of(this).acknowledge(emptyLayerDefault);
    // Sign-in: a Cognito user pool (e-mail as the username, verified; TOTP MFA required), its
    // hosted sign-in pages and one confidential client for the web app (authorization code flow;
    // the app always sends PKCE). None of it when OidcIssuer names an issuer of your own.
    const pool = new cognito.CfnUserPool(this, 'UserPool', {
      userPoolName: Fn.sub('${AWS::StackName}-users'),
      usernameAttributes: ['email'],
      autoVerifiedAttributes: ['email'],
      usernameConfiguration: { caseSensitive: false },
      schema: [{ name: 'email', attributeDataType: 'String', required: true, mutable: true }],
      adminCreateUserConfig: {
        allowAdminCreateUserOnly: Fn.conditionIf(signupClosed.logicalId, true, false),
      },
      accountRecoverySetting: { recoveryMechanisms: [{ name: 'verified_email', priority: 1 }] },
      userAttributeUpdateSettings: { attributesRequireVerificationBeforeUpdate: ['email'] },
      mfaConfiguration: 'ON',
      enabledMfas: ['SOFTWARE_TOKEN_MFA'],
      policies: {
        passwordPolicy: {
          minimumLength: 12, requireLowercase: true, requireUppercase: true, requireNumbers: true,
          requireSymbols: true, temporaryPasswordValidityDays: 7,
        },
      },
      userPoolTier: 'ESSENTIALS',
    });
    pool.cfnOptions.condition = useCognito;
    // The pool holds the people who sign in (the table the rest): kept on delete, like it.
    pool.applyRemovalPolicy(RemovalPolicy.RETAIN);
    Validations.of(pool).acknowledge({
      id: 'AwsSolutions::AwsSolutions-COG8',
      reason: 'Essentials, not Plus: Plus (threat protection) is billed per monthly active user with no free ' +
        'tier; required TOTP MFA and the password policy are the defence here.',
    });
    const client = new cognito.CfnUserPoolClient(this, 'UserPoolClient', {
      userPoolId: pool.ref,
      clientName: 'bridle-web',
      generateSecret: true,
      allowedOAuthFlowsUserPoolClient: true,
      allowedOAuthFlows: ['code'],
      allowedOAuthScopes: ['openid', 'email', 'profile'],
      // The web app's address (BRIDLE_PUBLIC_URL in WebSecrets): PublicBaseUrl when set.
      callbackUrLs: [Fn.conditionIf(hasPublicUrl.logicalId, `${publicBaseUrl.valueAsString}/auth/callback`,
        `${webUrl.url}auth/callback`).toString()],
      logoutUrLs: [Fn.conditionIf(hasPublicUrl.logicalId, `${publicBaseUrl.valueAsString}/`, webUrl.url).toString()],
      supportedIdentityProviders: ['COGNITO'],
      // Only the hosted pages sign people in; no password flow from a client.
      explicitAuthFlows: ['ALLOW_REFRESH_TOKEN_AUTH'],
      preventUserExistenceErrors: 'ENABLED',
      enableTokenRevocation: true,
    });
    client.cfnOptions.condition = useCognito;
    const domain = new cognito.CfnUserPoolDomain(this, 'UserPoolDomain', {
      userPoolId: pool.ref,
      // <prefix>.auth.<region>.amazoncognito.com; by default the stack name and the first 8
      // characters of the stack id's UUID (unique per stack, and no account id in a public name).
      domain: Fn.conditionIf(hasDomainPrefix.logicalId, domainPrefix.valueAsString,
        Fn.join('-', [Aws.STACK_NAME, Fn.select(0, Fn.split('-', Fn.select(2, Fn.split('/', Aws.STACK_ID))))])).toString(),
    });
    domain.cfnOptions.condition = useCognito;
    Validations.of(domain).acknowledge({
      id: 'CloudFormation-Validate::W1030',
      reason: 'The empty CognitoDomainPrefix default never reaches Domain: HasCognitoDomainPrefix picks the derived prefix then.',
    });

    // The web app's sign-in settings, filled in by the stack; the web function knows it by name.
    const webSecrets = new secrets.Secret(this, 'WebSecrets', {
      secretName: Fn.sub(WEB_SECRET_NAME),
      description: 'Bridle web app sign-in (JSON, set by the stack): BRIDLE_OIDC_ISSUER, BRIDLE_OIDC_CLIENT_ID, ' +
        'BRIDLE_OIDC_CLIENT_SECRET, BRIDLE_PUBLIC_URL.',
      // Not plain text in the template: references resolved by CloudFormation at deploy time.
      secretStringValue: SecretValue.unsafePlainText(Fn.sub(
        '{"BRIDLE_OIDC_ISSUER":"${Issuer}","BRIDLE_OIDC_CLIENT_ID":"${ClientId}",' +
        '"BRIDLE_OIDC_CLIENT_SECRET":"${ClientSecret}","BRIDLE_PUBLIC_URL":"${PublicUrl}"}',
        {
          Issuer: Fn.conditionIf(useCognito.logicalId, `https://${pool.attrProviderUrl}`, oidcIssuer.valueAsString).toString(),
          ClientId: Fn.conditionIf(useCognito.logicalId, client.ref, oidcClientId.valueAsString).toString(),
          ClientSecret: Fn.conditionIf(useCognito.logicalId, client.attrClientSecret, oidcClientSecret.valueAsString).toString(),
          // Where people reach the web app and sign in: the login cookie is that host's.
          PublicUrl: Fn.conditionIf(hasPublicUrl.logicalId, publicBaseUrl.valueAsString, webBase).toString(),
        })),
    });
    Validations.of(webSecrets).acknowledge({
      id: 'AwsSolutions::AwsSolutions-SMG4',
      reason: 'The client secret is issued by Cognito (or your own issuer); no Lambda can rotate it.',
    });
    Validations.of(webSecrets).acknowledge({
      id: 'CloudFormation-Validate::W1030',
      reason: 'OidcClientSecret is one value inside the JSON SecretString (never empty as a whole); its empty ' +
        'default is for Cognito (UseCognito) or a public client.',
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
    cfnStage.routeSettings = Object.fromEntries(Object.entries(ROUTE_THROTTLES).map(
      ([key, t]) => [key, { ThrottlingBurstLimit: t.burst, ThrottlingRateLimit: t.rate }]));
    const integration = new HttpLambdaIntegration('WebhookIntegration', webhook);
    for (const [, method, routePath] of ROUTES) {
      const routes = api.addRoutes({ path: routePath, methods: [method as apigw.HttpMethod], integration });
      // A stage's route settings name routes that must exist first.
      for (const route of routes) stage.node.addDependency(route);
    }
    Validations.of(api).acknowledge({
      id: 'AwsSolutions::AwsSolutions-APIG4',
      reason: 'Platforms authenticate by signing each request; the webhook verifies the signature on the raw bytes.',
    });

    // Alarms -> SNS topic.
    const topic = new sns.Topic(this, 'AlarmTopic', { displayName: 'Bridle alarms' });
    const topicPolicy = new sns.TopicPolicy(this, 'AlarmTopicPolicy', { topics: [topic] });
    // This policy replaces the topic's default one, which is what let the account's own
    // CloudWatch alarms publish: each service that notifies is named here.
    topicPolicy.document.addStatements(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: {
          StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID },
          ArnLike: {
            'aws:SourceArn': `arn:${Aws.PARTITION}:cloudwatch:${Aws.REGION}:${Aws.ACCOUNT_ID}:alarm:*`,
          },
        },
      }),
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
    alarm('WebErrorsAlarm', 'The web function failed.', 'AWS/Lambda', 'Errors', fnDims(web), 'Sum', 300, 1, 0);
    alarm('WebThrottlesAlarm', 'The web function was throttled.', 'AWS/Lambda', 'Throttles', fnDims(web), 'Sum', 300, 1, 0);
    alarm('Api5xxAlarm', 'The webhook API answered 5xx (platforms will retry, then give up).', 'AWS/ApiGateway',
      '5xx', [{ name: 'ApiId', value: api.apiId }], 'Sum', 300, 1, 0);
    alarm('QueueRefusedAlarm', 'The queue refused a message for good (too large for SQS); the webhook answered 200 and dropped it.',
      'Bridle', 'WebhookRejects', [{ name: 'Reason', value: 'queue_refused' }], 'Sum', 300, 1, 0);
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
      [webSecrets, 'WebSecrets'], [webLogs, 'WebLogGroup'], [webRole, 'WebRole'], [web, 'WebFunction'],
      [webUrl, 'WebFunctionUrl'],
      [api, 'HttpApi'], [stage, 'HttpApiApiGatewayDefaultStage'], [topic, 'AlarmTopic'],
      [topicPolicy, 'AlarmTopicPolicy'],
    ];
    for (const [c, logicalId] of ids) {
      (c.node.defaultChild as CfnResource).overrideLogicalId(logicalId);
    }
    for (const [c, logicalId] of [[pool, 'UserPool'], [client, 'UserPoolClient'], [domain, 'UserPoolDomain']] as const) {
      c.overrideLogicalId(logicalId);
    }

    const apiUrl = API_URL;
    const out = (id: string, value: string, description?: string) => new CfnOutput(this, id, { value, description });
    out('WebAppUrl', webUrl.url, 'The web app (sign in here; the onboarding reply links here unless PublicBaseUrl is set).');
    // The web app builds its redirect from BRIDLE_PUBLIC_URL: PublicBaseUrl when set.
    out('OidcCallbackUrl', Fn.conditionIf(hasPublicUrl.logicalId, `${publicBaseUrl.valueAsString}/auth/callback`,
      `${webUrl.url}auth/callback`).toString(),
      'The sign-in callback (registered on the Cognito client; register it at your own issuer).');
    out('WebSecretsArn', webSecrets.secretArn, "The web app's sign-in settings (filled in by the stack).");
    new CfnOutput(this, 'UserPoolId', {
      value: pool.ref, condition: useCognito,
      description: 'The Cognito user pool (aws cognito-idp admin-create-user --user-pool-id ...).',
    });
    new CfnOutput(this, 'CognitoSignInDomain', {
      value: Fn.sub('https://${UserPoolDomain}.auth.${AWS::Region}.amazoncognito.com'), condition: useCognito,
      description: 'The Cognito hosted sign-in domain.',
    });
    out('ApiUrl', Fn.sub(apiUrl), "The webhook API's base URL.");
    out('WhatsAppWebhookUrl', Fn.sub(`${apiUrl}/webhooks/whatsapp`), 'Meta app dashboard -> WhatsApp -> Configuration -> Callback URL.');
    out('TelegramWebhookUrl', Fn.sub(`${apiUrl}/webhooks/telegram`), 'setWebhook url (with secret_token = TELEGRAM_SECRET_TOKEN).');
    out('SlackWebhookUrl', Fn.sub(`${apiUrl}/webhooks/slack`), 'Slack app -> Event Subscriptions -> Request URL, and Interactivity & Shortcuts -> Request URL.');
    out('TwilioWebhookUrl', Fn.sub(`${apiUrl}/webhooks/twilio`), 'Twilio number -> Messaging -> "A message comes in" webhook (HTTP POST).');
    out('GenericWebhookUrl', Fn.sub(`${apiUrl}/webhooks/generic`), 'The generic signed-JSON webhook.');
    out('WebhookSecretsArn', webhookSecrets.secretArn, 'Put the webhook signing secrets here (JSON object).');
    out('WorkerSecretsArn', workerSecrets.secretArn, 'Put the reply credentials here (JSON object).');
    out('WebhookFunctionName', webhook.functionName,
      'The webhook function (aws lambda update-function-configuration --function-name ...; its log group is named by aws lambda get-function-configuration --function-name <name> --query LoggingConfig.LogGroup).');
    out('WorkerFunctionName', worker.functionName, 'The worker function (its log group is named by aws lambda get-function-configuration --function-name <name> --query LoggingConfig.LogGroup).');
    out('WebFunctionName', web.functionName, "The web app's function (its log group is named by aws lambda get-function-configuration --function-name <name> --query LoggingConfig.LogGroup).");
    out('TableName', table.tableName);
    out('MediaBucketName', mediaBucket.bucketName);
    out('QueueUrl', queue.queueUrl);
    out('DeadLetterQueueUrl', dlq.queueUrl);
    out('AlarmTopicArn', topic.topicArn);
    out('DashboardUrl', Fn.sub('https://console.aws.amazon.com/cloudwatch/home?region=${AWS::Region}#dashboards:name=${Dashboard}'));
  }
}
