/** The broker's counters, as `/metrics` shows them. */
export interface ClusterCounters {
  published: number;
  publishFailures: number;
  received: number;
  replayed: number;
}

/** What a cluster node reports on `/health` and `/metrics`. */
export interface ClusterState {
  node: string;
  /** Connected to NATS. */
  connected: boolean;
  /** Joins are taken: connected and the roster loaded. */
  accepting: boolean;
  /** Relay nodes alive, this one included. */
  nodes: number;
  counters: ClusterCounters;
  /** Records dropped for a missing or wrong seal (another NATS client, another secret). */
  rejected?: number;
  /** NATS's clock minus this node's (ms), once measured (cluster-clock.ts). */
  clockOffsetMs?: number | undefined;
}

/** The `/health` addition and the `/metrics` lines of a cluster node. */
export function describeCluster(state: ClusterState): {
  health: Record<string, unknown>;
  metrics: string;
} {
  const { node, counters } = state;
  const nats = state.accepting ? 'connected' : 'disconnected';
  return {
    health: {
      cluster: {
        node,
        nats,
        nodes: state.nodes,
        rejected: state.rejected ?? 0,
        clockOffsetMs: state.clockOffsetMs === undefined ? null : Math.round(state.clockOffsetMs),
      },
    },
    metrics: [
      metric(
        'connected',
        'gauge',
        '1 while this node is connected to NATS.',
        state.connected ? 1 : 0,
      ),
      metric('nodes', 'gauge', 'Relay nodes alive in the cluster.', state.nodes),
      metric('published_total', 'counter', 'Frames published to room streams.', counters.published),
      metric(
        'publish_failures_total',
        'counter',
        'Frames NATS did not take.',
        counters.publishFailures,
      ),
      metric('received_total', 'counter', 'Frames from other nodes.', counters.received),
      metric('replayed_total', 'counter', 'Frames replayed on rejoin.', counters.replayed),
      metric(
        'rejected_records_total',
        'counter',
        'Records from NATS dropped for a missing or wrong seal of the shared secret.',
        state.rejected ?? 0,
      ),
    ].join(''),
  };
}

/** One Prometheus metric `relay_cluster_<name>` with its help and type lines. */
function metric(name: string, type: 'gauge' | 'counter', help: string, value: number): string {
  const full = `relay_cluster_${name}`;
  return `# HELP ${full} ${help}\n# TYPE ${full} ${type}\n${full} ${value}\n`;
}
