"""Writes the NVIDIA FLARE job of bench/peers_service_bench.sh: one round of FLARE's
ScatterAndGather workflow (FedAvg) over N clients with its in-time accumulating aggregator
(InTimeAccumulateWeightedAggregator, weights from each result's NUM_STEPS_CURRENT_ROUND),
a one-element initial model (so the round's traffic is the clients' updates, as for every
contender), and the components of flare_components.py, shipped in the job's custom folder
as FLARE requires of custom code."""
import json
import os
import shutil

CUSTOM_MODULES = ("flare_components.py", "peer_updates.py", "process_memory.py")


def component(id_, path, **args):
    return {"id": id_, "path": path, "args": args}


def write_job(job_dir, clients, updates_file, elements, out_dir):
    server = {
        "format_version": 2,
        "workflows": [component(
            "scatter_and_gather", "nvflare.app_common.workflows.scatter_and_gather.ScatterAndGather",
            min_clients=clients, num_rounds=1, start_round=0, wait_time_after_min_received=0,
            aggregator_id="aggregator", persistor_id="persistor", shareable_generator_id="shareable_generator",
            train_task_name="train", train_timeout=0, task_check_period=0.1)],
        "components": [
            component("persistor", "nvflare.app_common.np.np_model_persistor.NPModelPersistor", model=[0.0]),
            component("shareable_generator",
                      "nvflare.app_common.shareablegenerators.full_model_shareable_generator.FullModelShareableGenerator"),
            component("aggregator",
                      "nvflare.app_common.aggregators.intime_accumulate_model_aggregator.InTimeAccumulateWeightedAggregator",
                      expected_data_kind="WEIGHTS"),
            component("round_probe", "flare_components.RoundProbe", out_dir=out_dir),
        ],
    }
    client = {
        "format_version": 2,
        "executors": [{"tasks": ["train"], "executor": {
            "path": "flare_components.UpdateSender",
            "args": {"updates_file": updates_file, "elements": elements, "out_dir": out_dir}}}],
    }
    meta = {"name": "peers_service_round", "resource_spec": {}, "min_clients": clients,
            "deploy_map": {"app": ["@ALL"]}}
    config = os.path.join(job_dir, "app", "config")
    custom = os.path.join(job_dir, "app", "custom")
    os.makedirs(config, exist_ok=True)
    os.makedirs(custom, exist_ok=True)
    for module in CUSTOM_MODULES:
        shutil.copy(os.path.join(os.path.dirname(os.path.abspath(__file__)), module), custom)
    for name, content in (("config_fed_server.json", server), ("config_fed_client.json", client)):
        with open(os.path.join(config, name), "w") as out:
            json.dump(content, out, indent=1)
    with open(os.path.join(job_dir, "meta.json"), "w") as out:
        json.dump(meta, out, indent=1)
