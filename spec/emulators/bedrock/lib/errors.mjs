// AWS error answers: the HTTP status, x-amzn-errortype and a JSON {"message"} body (restJson1,
// docs/protocols/bedrock.md §1.4), and the same errors' names inside an event stream (§3.2).
import { sendJson } from './util.mjs';

// Modeled errors of both planes: HTTP status and fault.
export const MODELED = {
  ValidationException: { status: 400, fault: 'client' },
  ServiceQuotaExceededException: { status: 402, fault: 'client' },
  AccessDeniedException: { status: 403, fault: 'client' },
  ResourceNotFoundException: { status: 404, fault: 'client' },
  ConflictException: { status: 409, fault: 'client' },
  ThrottlingException: { status: 429, fault: 'client' },
  InternalServerException: { status: 500, fault: 'server' },
};

// Errors of AWS's front end (authentication, routing), which no service model lists. Their
// x-amzn-errortype carries a ":<namespace URL>" suffix that clients cut off.
export const FRONT_END = {
  MissingAuthenticationTokenException: 403,
  IncompleteSignatureException: 403,
  InvalidSignatureException: 403,
  UnrecognizedClientException: 403,
  UnknownOperationException: 404,
  SerializationException: 400,
  ServiceUnavailableException: 503,
};
const FRONT_END_NS = 'http://internal.amazon.com/coral/com.amazon.coral.service/';

export class AwsError extends Error {
  constructor(type, message, extra = {}) {
    super(message);
    this.type = type;
    this.extra = extra;
    this.status = MODELED[type]?.status ?? FRONT_END[type] ?? extra.status ?? 500;
  }
}

export function validation(message, reason = 'FieldValidationFailed', fieldList) {
  const extra = { reason };
  if (fieldList) extra.fieldList = fieldList;
  return new AwsError('ValidationException', message, extra);
}

export function notFound(message) {
  return new AwsError('ResourceNotFoundException', message);
}

export function sendError(res, err) {
  const type = err.type;
  const header = MODELED[type] ? type : `${type}:${FRONT_END_NS}`;
  const body = { message: err.message, ...err.extra };
  delete body.status;
  sendJson(res, err.status, body, { 'x-amzn-errortype': header });
}

// The lowerCamel union member name an exception has inside CodeInterpreterStreamOutput.
export function streamMemberName(type) {
  return type.charAt(0).toLowerCase() + type.slice(1);
}
