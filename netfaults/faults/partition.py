"""A partition: every packet on the named links dropped (one way or both, by the links given)."""
from pschaos.netfaults.faults.loss import Loss


class Partition(Loss):
    kind = "partition"
    params_spec = {}

    def __init__(self, ctx, links, params):
        params = dict(params)
        super(Loss, self).__init__(ctx, links, params)
        self.params["percent"] = 100.0
        self.handles = []
        self.table_ready()
