// Event-stream frames (application/vnd.amazon.eventstream) encoded with AWS's own codec
// (@smithy/eventstream-codec): result events, modeled exceptions and unmodeled errors, with the
// headers AgentCore uses (docs/protocols/bedrock.md §3.2).
import { EventStreamCodec } from '@smithy/eventstream-codec';
import { fromUtf8, toUtf8 } from '@smithy/util-utf8';
import { streamMemberName } from './errors.mjs';

const codec = new EventStreamCodec(toUtf8, fromUtf8);

const str = (value) => ({ type: 'string', value });

function encode(headers, payload) {
  return Buffer.from(codec.encode({ headers, body: payload }));
}

// A `result` event carrying a CodeInterpreterResult.
export function resultFrame(result) {
  return encode({
    ':message-type': str('event'),
    ':event-type': str('result'),
    ':content-type': str('application/json'),
  }, fromUtf8(JSON.stringify(result)));
}

// A modeled exception inside the stream: `:exception-type` is the union member name.
export function exceptionFrame(type, message, extra = {}) {
  return encode({
    ':message-type': str('exception'),
    ':exception-type': str(streamMemberName(type)),
    ':content-type': str('application/json'),
  }, fromUtf8(JSON.stringify({ message, ...extra })));
}

// An unmodeled error: code and message in headers, no payload.
export function errorFrame(code, message) {
  return encode({
    ':message-type': str('error'),
    ':error-code': str(code),
    ':error-message': str(message),
  }, new Uint8Array(0));
}

// The same frame with its message CRC broken (the last 4 bytes).
export function corruptCrc(frame) {
  const out = Buffer.from(frame);
  out[out.length - 1] ^= 0xff;
  return out;
}

export function decodeFrame(buf) {
  return codec.decode(buf);
}
