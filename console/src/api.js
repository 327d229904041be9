// The one place that talks to the broker: the JSON API of docs/admin-api.md,
// on the same origin as the console. URLs are relative ("api/v1/..."), so the
// console works wherever the admin listener or a proxy in front of it serves
// it, as long as the API sits beside it.

export const API_BASE = 'api/v1';

/** An answer other than 2xx: status plus the API's {error_code, error, message}. */
export class ApiError extends Error {
  constructor(status, body, statusText) {
    super((body && body.message) || statusText || `HTTP ${status}`);
    this.status = status;
    this.error = body && body.error;
    this.errorCode = body && body.error_code;
  }
}

// A request that has not answered in this long is abandoned, so a hung
// broker shows an error instead of a console that silently stops updating.
const request_timeout_ms = 15000;

/**
 * api('/topics') -> parsed JSON; api('/topics', {method: 'POST', body: {...}}).
 * Throws ApiError for a non-2xx answer, Error for a network failure.
 */
export async function api(path, { method = 'GET', body, query } = {}) {
  let url = API_BASE + path;
  if (query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    const s = q.toString();
    if (s) url += `?${s}`;
  }
  const ctrl = new AbortController();
  const timer = setTimeout(() => ctrl.abort(), request_timeout_ms);
  let res;
  try {
    res = await fetch(url, {
      method,
      headers: body !== undefined ? { 'Content-Type': 'application/json' } : {},
      body: body !== undefined ? JSON.stringify(body) : undefined,
      signal: ctrl.signal,
      cache: 'no-store',
    });
  } catch (e) {
    throw new Error(e.name === 'AbortError' ? `no answer from the broker in ${request_timeout_ms / 1000} s` : `cannot reach the broker: ${e.message}`);
  } finally {
    clearTimeout(timer);
  }
  const text = await res.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = res.ok ? text : { message: text.slice(0, 300) };
    }
  }
  if (!res.ok) throw new ApiError(res.status, parsed, res.statusText);
  return parsed;
}

export const enc = encodeURIComponent;
