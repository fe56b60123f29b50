import { CLUSTER_SLOTS, type Topology } from './topology';
import { verdict, type Verdict } from './verdict';

/** Slot coverage and state of a Cluster; one `ok` line for a standalone server. */
export function checkCluster(topology: Topology): Verdict {
  const view = topology.cluster;
  if (view === undefined) return verdict('cluster', 'ok', 'not a cluster: one primary holds every key');
  if (view.coveredSlots === undefined) return verdict('cluster', 'unknown', `the slot map could not be read (${view.error ?? 'no reply'})`);
  const masters = `${topology.primaries.length} master(s)`;
  const uncovered = CLUSTER_SLOTS - view.coveredSlots;
  if (uncovered > 0) {
    return verdict(
      'cluster',
      'fail',
      `${uncovered} of ${CLUSTER_SLOTS} slots have no master (${masters} serve the rest; cluster_state:${view.state ?? '?'}): the scopes that hash there cannot be guarded, and whatever locks they held are gone`,
      { fix: 'assign every slot (redis-cli --cluster fix), or bring back the master that served them' },
    );
  }
  if (view.state !== 'ok') {
    return verdict('cluster', 'fail', `cluster_state:${view.state ?? 'unknown'} although every slot is assigned: the cluster refuses commands`, {
      fix: 'redis-cli --cluster check <node> shows which node is failing',
    });
  }
  return verdict('cluster', 'ok', `all ${CLUSTER_SLOTS} slots served by ${masters}, cluster_state:ok`);
}
