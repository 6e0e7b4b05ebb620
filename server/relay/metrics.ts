/** Cheap counters of the relay, rendered as Prometheus text on the status port. */
export interface RelayMetrics {
  joins: number;
  authFailures: number;
  /** Routed frames accepted from clients. */
  messagesRouted: number;
  /** Routed frames written to a live receiver (one per receiver). */
  messagesDelivered: number;
  /** Routed frames stored for an absent device (one per absent receiver). */
  messagesBuffered: number;
  /** Buffered frames handed to a device that joined again. */
  bufferDelivered: number;
  /** Buffered frames dropped because the window expired. */
  bufferDroppedExpired: number;
  /** Buffered frames dropped because a device reached `buffer.maxMessages` / `buffer.deviceMaxBytes`. */
  bufferDroppedCap: number;
  /** Buffered frames (one per device) dropped to keep a user's rooms within `buffer.userMaxBytes`. */
  bufferDroppedUserBound: number;
  /** Buffered frames (one per device) dropped to keep the buffer within `buffer.maxBytes`. */
  bufferDroppedBufferBound: number;
  /** Frames for absent devices lost because their write transaction failed (a full disk). */
  bufferDroppedWriteFailed: number;
  /** Buffer write transactions that failed. */
  bufferWriteFailures: number;
  /** SQLite transactions that wrote buffered frames. */
  bufferFlushes: number;
  rateLimited: number;
  /** Connections closed because they did not answer a ping. */
  heartbeatTimeouts: number;
  joinTimeouts: number;
  replaced: number;
  revoked: number;
  slowReceivers: number;
  /** Error frames sent, by code. */
  errors: Map<string, number>;
}

export function createMetrics(): RelayMetrics {
  return {
    joins: 0,
    authFailures: 0,
    messagesRouted: 0,
    messagesDelivered: 0,
    messagesBuffered: 0,
    bufferDelivered: 0,
    bufferDroppedExpired: 0,
    bufferDroppedCap: 0,
    bufferDroppedUserBound: 0,
    bufferDroppedBufferBound: 0,
    bufferDroppedWriteFailed: 0,
    bufferWriteFailures: 0,
    bufferFlushes: 0,
    rateLimited: 0,
    heartbeatTimeouts: 0,
    joinTimeouts: 0,
    replaced: 0,
    revoked: 0,
    slowReceivers: 0,
    errors: new Map(),
  };
}

export function countError(metrics: RelayMetrics, code: string): void {
  metrics.errors.set(code, (metrics.errors.get(code) ?? 0) + 1);
}

/** Gauges read at scrape time. */
export interface RelayGauges {
  connections: number;
  rooms: number;
  /** Frames committed to the SQLite buffer. */
  bufferedStored: number;
  /** Frames queued for the next buffer transaction. */
  bufferedPending: number;
  /** Bytes counted against `buffer.maxBytes`. */
  bufferBytes: number;
  /** relay.db and its WAL on disk. */
  bufferFileBytes: number;
  absentDevices: number;
  /** Bytes not yet sent to receivers that are behind (`relay.maxMemoryBytes` bounds it). */
  unsentBytes: number;
  /** Connections refused for `relay.maxUnjoinedPerAddress`, since the start. */
  unjoinedRefused: number;
  /** Unjoined connections closed to make room in the budget of untrusted connections. */
  unjoinedEvicted: number;
  /** The process's budget of untrusted connections: its size, what it holds, all it closed. */
  budget: { size: number; held: number; evicted: number };
}

function line(out: string[], name: string, type: 'counter' | 'gauge', help: string, value: number) {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${value}`);
}

/** Prometheus text exposition format 0.0.4. */
export function renderMetrics(metrics: RelayMetrics, gauges: RelayGauges): string {
  const out: string[] = [];
  renderTraffic(out, metrics, gauges);
  renderBuffer(out, metrics, gauges);
  renderClosures(out, metrics, gauges);
  return `${out.join('\n')}\n`;
}

/** Connections, rooms, joins and routed messages. */
function renderTraffic(out: string[], metrics: RelayMetrics, gauges: RelayGauges): void {
  line(out, 'relay_connections', 'gauge', 'Open WebSocket connections.', gauges.connections);
  line(out, 'relay_rooms', 'gauge', 'Rooms with at least one device present.', gauges.rooms);
  line(out, 'relay_absent_devices', 'gauge', 'Devices being buffered for.', gauges.absentDevices);
  line(
    out,
    'relay_buffer_messages',
    'gauge',
    'Messages committed to the buffer.',
    gauges.bufferedStored,
  );
  line(
    out,
    'relay_buffer_pending_messages',
    'gauge',
    'Messages not yet committed.',
    gauges.bufferedPending,
  );
  line(out, 'relay_joins_total', 'counter', 'Successful joins.', metrics.joins);
  line(
    out,
    'relay_auth_failures_total',
    'counter',
    'Joins refused with auth_failed.',
    metrics.authFailures,
  );
  line(
    out,
    'relay_messages_routed_total',
    'counter',
    'Routed messages accepted from clients.',
    metrics.messagesRouted,
  );
  line(
    out,
    'relay_messages_delivered_total',
    'counter',
    'Routed messages written to a connected receiver.',
    metrics.messagesDelivered,
  );
  line(
    out,
    'relay_messages_buffered_total',
    'counter',
    'Routed messages stored for an absent device.',
    metrics.messagesBuffered,
  );
  line(
    out,
    'relay_buffer_delivered_total',
    'counter',
    'Buffered messages delivered on rejoin.',
    metrics.bufferDelivered,
  );
}

/** What the buffer keeps, drops and writes. */
function renderBuffer(out: string[], metrics: RelayMetrics, gauges: RelayGauges): void {
  out.push(
    '# HELP relay_messages_dropped_total Buffered messages dropped.',
    '# TYPE relay_messages_dropped_total counter',
    `relay_messages_dropped_total{reason="expired"} ${metrics.bufferDroppedExpired}`,
    `relay_messages_dropped_total{reason="cap"} ${metrics.bufferDroppedCap}`,
    `relay_messages_dropped_total{reason="user_bound"} ${metrics.bufferDroppedUserBound}`,
    `relay_messages_dropped_total{reason="buffer_bound"} ${metrics.bufferDroppedBufferBound}`,
    `relay_messages_dropped_total{reason="write_failed"} ${metrics.bufferDroppedWriteFailed}`,
  );
  line(
    out,
    'relay_buffer_write_failures_total',
    'counter',
    'Buffer write transactions that failed (the relay is unhealthy until one succeeds).',
    metrics.bufferWriteFailures,
  );
  line(
    out,
    'relay_buffer_bytes',
    'gauge',
    'Bytes counted against buffer.maxBytes.',
    gauges.bufferBytes,
  );
  line(
    out,
    'relay_buffer_file_bytes',
    'gauge',
    'Size of the buffer database and its WAL.',
    gauges.bufferFileBytes,
  );
  line(
    out,
    'relay_buffer_flushes_total',
    'counter',
    'Buffer write transactions.',
    metrics.bufferFlushes,
  );
}

/** Frames dropped and connections closed by the relay's limits, and error frames. */
function renderClosures(out: string[], metrics: RelayMetrics, gauges: RelayGauges): void {
  line(
    out,
    'relay_rate_limited_total',
    'counter',
    'Frames dropped by the per-connection rate limit.',
    metrics.rateLimited,
  );
  line(
    out,
    'relay_heartbeat_timeouts_total',
    'counter',
    'Connections closed for not answering a ping.',
    metrics.heartbeatTimeouts,
  );
  line(
    out,
    'relay_join_timeouts_total',
    'counter',
    'Connections closed with 4008.',
    metrics.joinTimeouts,
  );
  line(out, 'relay_replaced_total', 'counter', 'Connections closed with 4009.', metrics.replaced);
  line(out, 'relay_revoked_total', 'counter', 'Connections closed with 4003.', metrics.revoked);
  line(
    out,
    'relay_slow_receivers_total',
    'counter',
    'Connections closed for not reading.',
    metrics.slowReceivers,
  );
  line(
    out,
    'relay_unsent_bytes',
    'gauge',
    'Bytes not yet sent to receivers that are behind.',
    gauges.unsentBytes,
  );
  line(
    out,
    'relay_unjoined_refused_total',
    'counter',
    'Connections refused (429): too many unjoined from one address.',
    gauges.unjoinedRefused,
  );
  renderBudget(out, gauges);
  out.push(
    '# HELP relay_errors_total Error frames sent, by code.',
    '# TYPE relay_errors_total counter',
  );
  for (const [code, count] of metrics.errors)
    out.push(`relay_errors_total{code="${code}"} ${count}`);
}

/** The unjoined connections closed for the budget, and the process's budget itself. */
function renderBudget(out: string[], gauges: RelayGauges): void {
  line(
    out,
    'relay_unjoined_evicted_total',
    'counter',
    'Unjoined connections closed to make room for another address (the connection budget was full).',
    gauges.unjoinedEvicted,
  );
  line(
    out,
    'connection_budget',
    'gauge',
    'Untrusted connections (unjoined, open on the auth and status ports) the process holds at most.',
    gauges.budget.size,
  );
  line(
    out,
    'connection_budget_held',
    'gauge',
    'Untrusted connections the process holds now.',
    gauges.budget.held,
  );
  line(
    out,
    'connection_budget_evicted_total',
    'counter',
    'Untrusted connections closed on any port to make room for another address.',
    gauges.budget.evicted,
  );
}
