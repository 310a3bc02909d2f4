// EnableTracing: with "true" the webhook, worker and web functions get the ADOT collector layer,
// the OTLP settings that point the functions at it, and the X-Ray permissions; with "false"
// (the default) none of it. The template is read with TracingEnabled set either way (as
// CloudFormation would: Fn::If picked, AWS::NoValue dropped).

import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { Architecture } from 'aws-cdk-lib/aws-lambda';
import { BridleStack } from '../lib/stack';

const FUNCTIONS = { WebhookFunction: 'WebhookRole', WorkerFunction: 'WorkerRole', WebFunction: 'WebRole' };

function synth(architecture: Architecture): Record<string, any> {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new BridleStack(app, 'Bridle', { architecture, analyticsReporting: false });
  return Template.fromStack(stack).toJSON();
}

const NO_VALUE = Symbol('AWS::NoValue');
// The template with every Fn::If on TracingEnabled decided; other conditions left as they are.
function withTracing(node: unknown, on: boolean): unknown {
  if (Array.isArray(node)) {
    return node.map((x) => withTracing(x, on)).filter((x) => x !== NO_VALUE);
  }
  if (node === null || typeof node !== 'object') return node;
  const obj = node as Record<string, unknown>;
  if (obj.Ref === 'AWS::NoValue') return NO_VALUE;
  const iff = obj['Fn::If'] as [string, unknown, unknown] | undefined;
  if (iff && iff[0] === 'TracingEnabled') return withTracing(on ? iff[1] : iff[2], on);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) {
    const r = withTracing(v, on);
    if (r !== NO_VALUE) out[k] = r;
  }
  return out;
}

function traceStatements(template: Record<string, any>, role: string): any[] {
  return template.Resources[role].Properties.Policies
    .flatMap((p: any) => p.PolicyDocument.Statement)
    .filter((s: any) => JSON.stringify(s.Action).includes('xray:'));
}

test('EnableTracing is a parameter, "false" by default, with the layer ARN beside it', () => {
  const params = synth(Architecture.ARM_64).Parameters;
  assert.deepEqual(params.EnableTracing.AllowedValues, ['false', 'true']);
  assert.equal(params.EnableTracing.Default, 'false');
  assert.equal(params.AdotCollectorLayerArn.Default, '');
});

test('EnableTracing=true: each function gets the ADOT collector layer, the OTLP settings and X-Ray', () => {
  const template = withTracing(synth(Architecture.ARM_64), true) as Record<string, any>;
  for (const [fn, role] of Object.entries(FUNCTIONS)) {
    const props = template.Resources[fn].Properties;
    assert.equal(props.Layers.length, 1, `${fn}: one layer`);
    const layer = props.Layers[0]['Fn::If'];
    assert.equal(layer[0], 'HasAdotCollectorLayerArn');
    assert.deepEqual(layer[1], { Ref: 'AdotCollectorLayerArn' });
    assert.deepEqual(layer[2], { 'Fn::Sub':
      'arn:${AWS::Partition}:lambda:${AWS::Region}:901920570463:layer:aws-otel-collector-arm64-ver-0-102-1:1' });
    assert.equal(props.Environment.Variables.OTEL_EXPORTER_OTLP_ENDPOINT, 'http://localhost:4318', fn);
    assert.equal(props.Environment.Variables.OTEL_EXPORTER_OTLP_PROTOCOL, 'http/protobuf', fn);
    assert.deepEqual(traceStatements(template, role), [{
      Sid: 'Traces', Effect: 'Allow', Action: ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'], Resource: '*',
    }], role);
  }
});

test('the default layer follows the functions\' architecture (x86_64: amd64)', () => {
  const template = withTracing(synth(Architecture.X86_64), true) as Record<string, any>;
  const layer = template.Resources.WorkerFunction.Properties.Layers[0]['Fn::If'][2]['Fn::Sub'];
  assert.match(layer, /:layer:aws-otel-collector-amd64-ver-/);
});

test('EnableTracing=false: no layer, no OTLP settings, no X-Ray permission', () => {
  const template = withTracing(synth(Architecture.ARM_64), false) as Record<string, any>;
  for (const [fn, role] of Object.entries(FUNCTIONS)) {
    const props = template.Resources[fn].Properties;
    assert.deepEqual(props.Layers, [], `${fn}: no layer`);
    assert.ok(!Object.keys(props.Environment.Variables).some((k) => k.startsWith('OTEL_')), fn);
    assert.deepEqual(traceStatements(template, role), [], role);
    // The statements that were there before are all still there.
    assert.ok(template.Resources[role].Properties.Policies[0].PolicyDocument.Statement.length >= 3, role);
  }
});
