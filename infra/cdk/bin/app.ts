// The CDK app: one BridleStack, with cdk-nag's AwsSolutions checks run at synth
// (cdk-nag 3: Validations.of(app)); every acknowledged finding carries its reason in lib/stack.ts.

import { App, Validations } from 'aws-cdk-lib';
import { Architecture } from 'aws-cdk-lib/aws-lambda';
import { AwsSolutionsChecks } from 'cdk-nag';
import { BridleStack } from '../lib/stack';

const app = new App();
const arch = app.node.tryGetContext('architecture') === 'x86_64' ? Architecture.X86_64 : Architecture.ARM_64;
// Lower-case: the default Cognito sign-in domain is made of the stack name, and Cognito takes
// lower-case letters, digits and hyphens only (`-c stackName=…` for another; keep it lower-case,
// without aws, amazon or cognito, or pass CognitoDomainPrefix).
const stackName = app.node.tryGetContext('stackName') ?? 'bridle';
new BridleStack(app, stackName, {
  analyticsReporting: false,
  architecture: arch,
  // `-c prebuiltDir=../../target/lambda` uses the zips scripts/build-lambdas made (CI builds once).
  prebuiltDir: app.node.tryGetContext('prebuiltDir'),
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
