#!/usr/bin/env node
// Thin launcher so the bin link exists before the first build; the CLI lives in dist.
import "../dist/src/cli.js";
