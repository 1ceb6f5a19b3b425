#!/usr/bin/env node
// OpenAI Chat Completions emulator (tests only). See spec/emulators/README.md, "Model APIs".
//
//   node server.mjs [--port N] [--host 127.0.0.1] [--api-key KEY]... [--context-window TOKENS] [--chunk-chars N]
//                   [--exit-with-parent] [--verbose]
//
// Prints "listening <base-url>" as the first stdout line; clients use <base-url>/v1 as their base URL.
import { run } from '../lm/emulator.mjs';
import * as chat from './lib/chat.mjs';

run('openai', chat);
