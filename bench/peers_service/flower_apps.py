"""The Flower app of bench/peers_service_bench.sh (flower_service.py packs it with
peer_updates.py and process_memory.py into a Flower App Bundle and starts it with
`flwr run`). One round of FedAvg through Flower's deployment runtime:
  ServerApp  sends one "train" message per logical client, spread over the connected
             SuperNodes (client c to node c % nodes: a node answers several messages, each
             in a ClientApp process of its own, as its SuperExec launches them), then
             aggregates the replies with Flower's FedAvg strategy (aggregate_train,
             weighted by "num-examples"), notes the time, its peak memory and the aggregate.
  ClientApp  answers with the client's fixed update and weight, noting when it sent it.
The messages carry no model: the round's traffic is the clients' updates, as for every
contender."""
import json
import os
import time

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from . import peer_updates, process_memory

server_app = ServerApp()
client_app = ClientApp()


@server_app.main()
def server_main(grid: Grid, context: Context) -> None:
    config = context.run_config
    clients, nodes, out_dir = int(config["clients"]), int(config["nodes"]), str(config["out-dir"])
    deadline = time.time() + 300
    while len(node_ids := sorted(grid.get_node_ids())) < nodes:
        if time.time() > deadline:
            raise RuntimeError(f"only {len(node_ids)} of {nodes} SuperNodes connected")
        time.sleep(0.2)
    idle_kib = process_memory.start_window()
    messages = [Message(RecordDict({"config": ConfigRecord({"client": c})}), dst_node_id=node_ids[c % nodes],
                        message_type="train") for c in range(clients)]
    replies = list(grid.send_and_receive(messages, timeout=3600))
    strategy = FedAvg(min_train_nodes=1, min_available_nodes=1)
    arrays, _ = strategy.aggregate_train(1, replies)
    aggregate_at = time.time()
    peak_kib = process_memory.peak_since_kib()
    if arrays is None or len(replies) != clients:
        raise RuntimeError(f"{len(replies)} replies of {clients}, aggregate {'missing' if arrays is None else 'made'}")
    np.save(os.path.join(out_dir, "aggregate.npy"), arrays.to_numpy_ndarrays()[0])
    with open(os.path.join(out_dir, "serverapp.json.part"), "w") as out:
        json.dump({"aggregate_at": aggregate_at, "idle_kib": idle_kib, "peak_kib": peak_kib}, out)
    os.replace(os.path.join(out_dir, "serverapp.json.part"), os.path.join(out_dir, "serverapp.json"))


@client_app.train()
def client_train(msg: Message, context: Context) -> Message:
    config = context.run_config
    client = int(msg.content["config"]["client"])
    updates = peer_updates.load_updates(str(config["updates-file"]), int(config["elements"]))
    update, weight = peer_updates.client_update(updates, client)
    reply = RecordDict({"arrays": ArrayRecord([update]), "metrics": MetricRecord({"num-examples": weight})})
    with open(os.path.join(str(config["out-dir"]), f"sent-{client}"), "w") as sent:
        sent.write(repr(time.time()))
    return Message(reply, reply_to=msg)
