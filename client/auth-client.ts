import type { z } from 'zod';
import { isAuthErrorCode } from '../protocol/auth-codes.ts';
import {
  approvedDeviceSchema,
  currentDeviceSchema,
  type Device,
  type DeviceDescription,
  deviceLoginSchema,
  devicesSchema,
  errorBodySchema,
  type HostInfo,
  hostInfoSchema,
  jwtLoginSchema,
  type Member,
  type Members,
  memberAnswerSchema,
  membersSchema,
  type PairingPoll,
  type PairingStarted,
  type Project,
  pairingLinkSchema,
  pairingPollSchema,
  pairingStartedSchema,
  projectAnswerSchema,
  projectsSchema,
  registeredDeviceSchema,
  type SignedIn,
  type Subscription,
  sentSchema,
  subscriptionSchema,
  type User,
  type WaitingPairing,
  waitingPairingSchema,
} from './auth-types.ts';
import { AuthServiceError, SyncError } from './errors.ts';
import { answerWithoutErrorBody, unreachable, wrongService } from './service-check.ts';

/**
 * The two login flows of the seed: `device` = GET /auth/login, then verify with the device's
 * name and platform (device token at once); `jwt` = POST /auth/magic-link, then verify for a
 * JWT and POST /auth/devices.
 */
export type LoginVariant = 'device' | 'jwt';

export interface AuthClientOptions {
  /** The auth service, `http(s)://host:port` (a trailing slash is ignored). */
  authUrl: string;
  /** The device token for the endpoints that need one. */
  deviceToken?: string;
  /** Default: the global `fetch`. */
  fetch?: typeof fetch;
  /**
   * How long one request may take, answer included, before it fails as `unreachable` with the
   * reason `timeout` (a host that accepts the connection and never answers). Default 30 s.
   */
  requestTimeoutMs?: number;
}

const defaultRequestTimeoutMs = 30_000;

export interface AuthClient {
  readonly authUrl: string;
  /** A client for the same service that sends this device token. */
  withDeviceToken(deviceToken: string): AuthClient;
  /** `GET /.well-known/sync-host`: the relay URL and version of this host. */
  hostInfo(): Promise<HostInfo>;
  /** Asks for a login link for `email` (the same answer whether or not the user exists). */
  requestLogin(email: string, variant?: LoginVariant): Promise<void>;
  /** Verifies a link token (or the whole link) and registers this device in one call. */
  verifyWithDevice(tokenOrLink: string, device: DeviceDescription): Promise<SignedIn>;
  /** Verifies a link token (or the whole link) for a 15-minute JWT. */
  verifyForJwt(tokenOrLink: string): Promise<{ jwt: string; user: User }>;
  /** `POST /auth/devices` with a JWT from `verifyForJwt`. */
  registerDevice(
    jwt: string,
    device: DeviceDescription,
  ): Promise<{ deviceToken: string; device: Device }>;
  /**
   * Completes a sign-in with the token from the e-mail, by either variant. Resolves with the
   * device token for the caller to store.
   */
  signIn(tokenOrLink: string, device: DeviceDescription, variant?: LoginVariant): Promise<SignedIn>;
  /** This device and its user. */
  device(): Promise<{ device: Device; user: User }>;
  /** Every device of the user, ordered by id. */
  devices(): Promise<Device[]>;
  /** Removes a device (its token stops working at once). */
  deleteDevice(id: number): Promise<void>;
  projects(): Promise<Project[]>;
  /**
   * Registers a workspace for sync; idempotent by `projectKey`: registering a key again answers
   * the existing record (`created` false).
   */
  registerProject(
    projectKey: string,
    name: string,
  ): Promise<{ project: Project; created: boolean }>;
  deleteProject(id: number): Promise<void>;
  /** A project's owner and members (its owner or a member may ask). */
  members(projectId: number): Promise<Members>;
  /** Shares a project (its owner, on the team tier) with `email` as `role`. */
  share(projectId: number, email: string, role: Member['role']): Promise<Member>;
  /** Removes a member (the owner), or the caller itself (leaving). */
  removeMember(projectId: number, userId: number): Promise<void>;
  subscription(): Promise<Subscription>;
  /** `POST /auth/pair`: starts pairing this device; `pair()` runs the whole flow. */
  startPairing(device: DeviceDescription, email?: string): Promise<PairingStarted>;
  /** `GET /auth/pair/:pairingId`: still pending, or approved with the device token (once). */
  pollPairing(pairingId: string): Promise<PairingPoll>;
  /**
   * Lets the new device showing `code` join this device's user; resolves with that device. With
   * `deviceName`, only a waiting device of that name (the one the approver confirmed). The new
   * device gets its token once it accepts the account.
   */
  approvePairing(code: string, deviceName?: string): Promise<Device>;
  /** `POST /auth/pair/describe`: the device waiting with `code` (name, platform, address). */
  describePairing(code: string): Promise<WaitingPairing>;
  /** The new device accepts (or declines) the account a signed-in device approved it into. */
  answerPairing(pairingId: string, accept: boolean): Promise<void>;
  /** Refuses the new device showing `code`. */
  denyPairing(code: string): Promise<void>;
  /** Uses a pairing's sign-in link (or its token): approves that pairing for the link's address. */
  useLink(tokenOrLink: string): Promise<{ device: Device; user: User }>;
}

/** The token of a login link: accepts the bare 64-hex token or any URL/text carrying `token=`. */
export function linkToken(tokenOrLink: string): string {
  const text = tokenOrLink.trim();
  const fromQuery = /[?&]token=([^&#\s]+)/.exec(text);
  if (fromQuery?.[1] !== undefined) return decodeURIComponent(fromQuery[1]);
  return text;
}

function trimSlash(url: string): string {
  return url.replace(/\/+$/, '');
}

/** A request to the auth service: its answer parsed with `schema`, or the service's error. */
type Call = <S extends z.ZodType>(
  method: string,
  path: string,
  schema: S | undefined,
  init?: { body?: unknown; bearer?: string; query?: Record<string, string> },
) => Promise<{ data: z.infer<S>; status: number }>;

/** What the groups of the client's requests share. */
interface ClientContext {
  call: Call;
  /** The device token, or `not_signed_in` without one. */
  bearer(): string;
}

export function createAuthClient(options: AuthClientOptions): AuthClient {
  const authUrl = trimSlash(options.authUrl);
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const deviceToken = options.deviceToken;
  const requestTimeoutMs = options.requestTimeoutMs ?? defaultRequestTimeoutMs;
  const ctx: ClientContext = {
    call: createCall(authUrl, doFetch, requestTimeoutMs),
    bearer() {
      if (deviceToken === undefined || deviceToken === '') {
        throw new SyncError('not_signed_in', 'no device token: sign in first');
      }
      return deviceToken;
    },
  };
  return {
    authUrl,
    withDeviceToken: (token) => createAuthClient({ ...options, deviceToken: token }),
    ...signInRequests(ctx),
    ...accountRequests(ctx),
    ...pairingRequests(ctx),
  };
}

/** `call` on the auth service at `authUrl`: one request, its errors as the client's. */
function createCall(
  authUrl: string,
  doFetch: typeof globalThis.fetch,
  requestTimeoutMs: number,
): Call {
  return async function call<S extends z.ZodType>(
    method: string,
    path: string,
    schema: S | undefined,
    init: { body?: unknown; bearer?: string; query?: Record<string, string> } = {},
  ): Promise<{ data: z.infer<S>; status: number }> {
    const url = new URL(authUrl + path);
    for (const [key, value] of Object.entries(init.query ?? {})) url.searchParams.set(key, value);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    if (init.bearer !== undefined) headers.authorization = `Bearer ${init.bearer}`;
    let res: Response;
    let text: string;
    try {
      res = await doFetch(url, {
        method,
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: AbortSignal.timeout(requestTimeoutMs),
      });
      text = await res.text();
    } catch (err: unknown) {
      // A pinned host that shows another certificate says so itself.
      throw err instanceof SyncError ? err : unreachable(authUrl, err);
    }
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch (err: unknown) {
      if (!(err instanceof SyntaxError)) throw err;
      body = undefined;
    }
    if (!res.ok) throw await refusal(authUrl, doFetch, `${method} ${path}`, res, body);
    if (schema === undefined) return { data: undefined as z.infer<S>, status: res.status };
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const wrong = await wrongService(authUrl, res, doFetch);
      if (wrong !== undefined) throw wrong;
      throw new SyncError(
        'invalid_response',
        `${method} ${path} answered an unexpected body (is ${authUrl} a sync-host auth service?)`,
      );
    }
    return { data: parsed.data, status: res.status };
  };
}

/** The error of an answer that is not 2xx (`request`: its method and path). */
async function refusal(
  authUrl: string,
  doFetch: typeof globalThis.fetch,
  request: string,
  res: Response,
  body: unknown,
): Promise<Error> {
  const parsed = errorBodySchema.safeParse(body);
  // The relay's ports answer what no auth service does (426, 405, a 404 of theirs).
  if (!parsed.success || [404, 405, 426].includes(res.status)) {
    const wrong = await wrongService(authUrl, res, doFetch);
    if (wrong !== undefined) return wrong;
  }
  const retry = Number(res.headers.get('retry-after'));
  return new AuthServiceError(
    parsed.success && isAuthErrorCode(parsed.data.error.code)
      ? parsed.data.error.code
      : res.status >= 500
        ? 'internal'
        : 'http_error',
    parsed.success
      ? parsed.data.error.message
      : answerWithoutErrorBody(authUrl, request, res.status),
    res.status,
    Number.isFinite(retry) && retry > 0 ? retry : undefined,
  );
}

/** The host's description and signing in: a login link, verified for a device or a JWT. */
function signInRequests({ call }: ClientContext) {
  const requests = {
    async hostInfo() {
      return (await call('GET', '/.well-known/sync-host', hostInfoSchema)).data;
    },

    async requestLogin(email: string, variant: LoginVariant = 'device') {
      if (variant === 'device') {
        await call('GET', '/auth/login', sentSchema, { query: { email } });
      } else {
        await call('POST', '/auth/magic-link', sentSchema, { body: { email } });
      }
    },

    async verifyWithDevice(tokenOrLink: string, device: DeviceDescription) {
      const query = { token: linkToken(tokenOrLink), ...device };
      return (await call('GET', '/auth/verify', deviceLoginSchema, { query })).data;
    },

    async verifyForJwt(tokenOrLink: string) {
      const query = { token: linkToken(tokenOrLink) };
      return (await call('GET', '/auth/verify', jwtLoginSchema, { query })).data;
    },

    async registerDevice(jwt: string, device: DeviceDescription) {
      return (
        await call('POST', '/auth/devices', registeredDeviceSchema, { body: device, bearer: jwt })
      ).data;
    },

    async signIn(
      tokenOrLink: string,
      device: DeviceDescription,
      variant: LoginVariant = 'device',
    ): Promise<SignedIn> {
      if (variant === 'device') return requests.verifyWithDevice(tokenOrLink, device);
      const { jwt, user } = await requests.verifyForJwt(tokenOrLink);
      const registered = await requests.registerDevice(jwt, device);
      return { ...registered, user };
    },
  } satisfies Partial<AuthClient>;
  return requests;
}

/** The signed-in device's account: its devices, projects, members and subscription. */
function accountRequests({ call, bearer }: ClientContext) {
  return {
    async device() {
      return (await call('GET', '/auth/device', currentDeviceSchema, { bearer: bearer() })).data;
    },

    async devices() {
      return (await call('GET', '/auth/devices', devicesSchema, { bearer: bearer() })).data.devices;
    },

    async deleteDevice(id) {
      await call('DELETE', `/auth/device/${encodeURIComponent(String(id))}`, undefined, {
        bearer: bearer(),
      });
    },

    async projects() {
      return (await call('GET', '/auth/projects', projectsSchema, { bearer: bearer() })).data
        .projects;
    },

    async registerProject(projectKey, name) {
      const { data, status } = await call('POST', '/auth/project', projectAnswerSchema, {
        body: { projectKey, name },
        bearer: bearer(),
      });
      return { project: data.project, created: status === 201 };
    },

    async deleteProject(id) {
      await call('DELETE', `/auth/project/${encodeURIComponent(String(id))}`, undefined, {
        bearer: bearer(),
      });
    },

    async members(projectId) {
      const path = `/auth/project/${encodeURIComponent(String(projectId))}/members`;
      return (await call('GET', path, membersSchema, { bearer: bearer() })).data;
    },

    async share(projectId, email, role) {
      const path = `/auth/project/${encodeURIComponent(String(projectId))}/members`;
      const { data } = await call('POST', path, memberAnswerSchema, {
        body: { email, role },
        bearer: bearer(),
      });
      return data.member;
    },

    async removeMember(projectId, userId) {
      const path = `/auth/project/${encodeURIComponent(String(projectId))}/members/${encodeURIComponent(String(userId))}`;
      await call('DELETE', path, undefined, { bearer: bearer() });
    },

    async subscription() {
      return (await call('GET', '/auth/subscription', subscriptionSchema, { bearer: bearer() }))
        .data;
    },
  } satisfies Partial<AuthClient>;
}

/** Pairing: this device asking to join, or approving another. */
function pairingRequests({ call, bearer }: ClientContext) {
  return {
    async startPairing(device, email) {
      const body = email === undefined ? device : { ...device, email };
      return (await call('POST', '/auth/pair', pairingStartedSchema, { body })).data;
    },

    async pollPairing(pairingId) {
      const path = `/auth/pair/${encodeURIComponent(pairingId)}`;
      return (await call('GET', path, pairingPollSchema)).data;
    },

    async approvePairing(code, deviceName) {
      return (
        await call('POST', '/auth/pair/approve', approvedDeviceSchema, {
          body: deviceName === undefined ? { code } : { code, deviceName },
          bearer: bearer(),
        })
      ).data.device;
    },

    async describePairing(code) {
      return (
        await call('POST', '/auth/pair/describe', waitingPairingSchema, {
          body: { code },
          bearer: bearer(),
        })
      ).data.pairing;
    },

    async answerPairing(pairingId, accept) {
      const path = accept ? '/auth/pair/accept' : '/auth/pair/decline';
      await call('POST', path, undefined, { body: { pairingId } });
    },

    async denyPairing(code) {
      await call('POST', '/auth/pair/deny', undefined, { body: { code }, bearer: bearer() });
    },

    async useLink(tokenOrLink) {
      const query = { token: linkToken(tokenOrLink) };
      return (await call('GET', '/auth/verify', pairingLinkSchema, { query })).data;
    },
  } satisfies Partial<AuthClient>;
}
