"""The two NVIDIA FLARE components of bench/peers_service_bench.sh's FLARE job (written by
flare_service_round.py): UpdateSender, the client executor that answers the "train" task
with the client's fixed update (peer_updates.py) and notes when it sent it; RoundProbe, a
server component that opens the memory window when the round starts and, once the
in-time accumulating aggregator's result exists, notes the time, the server's peak memory
and the aggregate."""
import json
import os
import time

import numpy as np
from nvflare.apis.dxo import DXO, DataKind, MetaKey, from_shareable
from nvflare.apis.event_type import EventType
from nvflare.apis.executor import Executor
from nvflare.apis.fl_component import FLComponent
from nvflare.app_common.app_constant import AppConstants
from nvflare.app_common.app_event_type import AppEventType
from nvflare.app_common.np.constants import NPConstants

import peer_updates
import process_memory


class UpdateSender(Executor):
    def __init__(self, updates_file, elements, out_dir):
        super().__init__()
        self.updates_file, self.elements, self.out_dir = updates_file, elements, out_dir

    def execute(self, task_name, shareable, fl_ctx, abort_signal):
        site = fl_ctx.get_identity_name()  # site-1 .. site-N
        client = int(site.rsplit("-", 1)[1]) - 1
        update, weight = peer_updates.client_update(peer_updates.load_updates(self.updates_file, self.elements), client)
        with open(os.path.join(self.out_dir, f"sent-{client}"), "w") as sent:
            sent.write(repr(time.time()))
        return DXO(data_kind=DataKind.WEIGHTS, data={NPConstants.NUMPY_KEY: update},
                   meta={MetaKey.NUM_STEPS_CURRENT_ROUND: weight}).to_shareable()


class RoundProbe(FLComponent):
    def __init__(self, out_dir):
        super().__init__()
        self.out_dir, self.idle_kib = out_dir, None

    def handle_event(self, event_type, fl_ctx):
        if event_type == AppEventType.ROUND_STARTED:
            self.idle_kib = process_memory.start_window()
        elif event_type == AppEventType.AFTER_AGGREGATION:
            aggregate_at = time.time()
            peak_kib = process_memory.peak_since_kib()
            result = from_shareable(fl_ctx.get_prop(AppConstants.AGGREGATION_RESULT)).data[NPConstants.NUMPY_KEY]
            np.save(os.path.join(self.out_dir, "aggregate.npy"), result)
            with open(os.path.join(self.out_dir, "server.json"), "w") as out:
                json.dump({"aggregate_at": aggregate_at,
                           "servers": [{"name": "simulator", "idle_kib": self.idle_kib, "peak_kib": peak_kib}]}, out)
