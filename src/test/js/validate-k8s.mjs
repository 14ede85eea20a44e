// Validates Kubernetes manifests against the API's OpenAPI schemas as the npm package
// kubernetes-models packages them (and @kubernetes-models/prometheus-operator for ServiceMonitor).
// Usage: node validate-k8s.mjs NODE_MODULES_DIR FILE.yaml...
// Checks itself first: a Deployment with a wrong field type must be refused by the schema.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, ...files] = process.argv.slice(2);
const load = (file) => import(pathToFileURL(path.join(modules, file)).href);
const YAML = (await load('yaml/dist/index.js')).default ?? (await load('yaml/dist/index.js'));
const kinds = {
  'apps/v1/Deployment': ['kubernetes-models/apps/v1/Deployment.js', 'Deployment'],
  'v1/Service': ['kubernetes-models/v1/Service.js', 'Service'],
  'v1/PersistentVolumeClaim': ['kubernetes-models/v1/PersistentVolumeClaim.js', 'PersistentVolumeClaim'],
  'monitoring.coreos.com/v1/ServiceMonitor': ['@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor.js', 'ServiceMonitor'],
};

async function validate(doc) {
  const kind = kinds[`${doc.apiVersion}/${doc.kind}`];
  if (!kind) throw new Error(`no schema here for ${doc.apiVersion}/${doc.kind}`);
  const Model = (await load(kind[0]))[kind[1]];
  new Model(doc).validate();
}

const broken = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'x' },
  spec: { replicas: 'two', selector: { matchLabels: { a: 'b' } }, template: { spec: { containers: [{ name: 'c' }] } } } };
try {
  await validate(broken);
  console.error('the validator accepted replicas: "two"');
  process.exit(2);
} catch (e) {
  if (!/replicas/.test(e.message)) { console.error(`the self-check failed for another reason: ${e.message}`); process.exit(2); }
  console.log(`self-check: a broken Deployment is refused (${e.message.split('\n')[0].slice(0, 100)})`);
}

let failed = 0;
for (const file of files) {
  for (const doc of YAML.parseAllDocuments(fs.readFileSync(file, 'utf8')).map((d) => d.toJS()).filter(Boolean)) {
    try {
      await validate(doc);
      console.log(`valid ${file}: ${doc.kind} ${doc.metadata.name}`);
    } catch (e) {
      failed++;
      console.log(`INVALID ${file}: ${doc.kind} ${doc.metadata?.name}: ${e.message}`);
    }
  }
}
process.exit(failed ? 1 : 0);
