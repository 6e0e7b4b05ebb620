import express, { type Request, type RequestHandler } from 'express';
import { AppError } from './errors.ts';

/** Request bodies are JSON of at most 16 KiB. */
export const maxBodyBytes = 16 * 1024;

const parseJson = express.json({ limit: maxBodyBytes, strict: true, type: () => true });

/** Whether a request carries a body (a length above zero, or a chunked one). */
const hasBody = (req: Request): boolean =>
  req.headers['transfer-encoding'] !== undefined ||
  (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');

/**
 * Parses a JSON body. A body of any other Content-Type is 415 `unsupported_media_type`: browsers
 * send text/plain and form bodies cross-origin without a preflight, so accepting them would let
 * any web page post to the API.
 */
export const jsonBody: RequestHandler = (req, res, next) => {
  if (hasBody(req) && !req.is('application/json')) {
    throw new AppError(
      'unsupported_media_type',
      'request bodies must be JSON with Content-Type: application/json',
    );
  }
  parseJson(req, res, next);
};
