"""Clients that try to be counted twice in a tree behind a load balancer (run by
nginx_exactly_once_test.sh with the fedagg package installed).

  cut-ack LB A_METRICS B_METRICS ID N
      Clients 1..N each send one update through the load balancer LB, wait until an
      intermediate has counted it (its fedagg_updates_accepted_total goes up, so the ack
      is on its way), then cut the stream without reading the ack, and send the same
      update again through LB on a new stream, where it lands on either intermediate. A
      retry is refused ABORTED while the update is acknowledged but not yet delivered to the
      root (it is then sent again), and must end refused ALREADY_EXISTS, never acked.
      Prints how many final retries reached the other intermediate than the first attempt.
  both A B ID FIRST LAST
      Clients FIRST..LAST each send their update to intermediates A and B at the same
      moment, on two streams. Exactly one copy may be acked; the other must be refused
      (ALREADY_EXISTS or ABORTED).
Client n sends the int64 update w = [1, 1000 + n], so the root's result [count, sum]
shows a client counted twice or lost.
"""
import sys
import threading
import time
import urllib.request

import crc32c
import grpc
import numpy as np

from fedagg.v1 import aggregation_pb2 as pb
from fedagg.v1 import aggregation_pb2_grpc as pb_grpc


def metric(metrics_port, sample):
    """The value of `sample` (a metric name with its labels) on a server's /metrics; 0 if absent."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[1])
    return 0.0


def accepted(metrics_port):
    return metric(metrics_port, "fedagg_updates_accepted_total")


def rejected(metrics_port):
    return metric(metrics_port, 'fedagg_updates_rejected_total{code="ALREADY_EXISTS"}')


def update_requests(aggregation_id, n):
    values = np.array([1, 1000 + n], dtype="<i8").tobytes()
    return [
        pb.ContributeRequest(header=pb.UpdateHeader(aggregation_id=aggregation_id, fields=[pb.FieldLayout()])),
        pb.ContributeRequest(chunk=pb.Chunk(field=0, section=pb.VALUES, offset=0, data=values)),
        pb.ContributeRequest(end=pb.UpdateEnd(crc32c=crc32c.crc32c(values))),
    ]


class Stream:
    """One Contribute stream: Hello and Welcome, then requests sent on demand."""

    def __init__(self, address, client_id):
        self.channel = grpc.insecure_channel(address)
        self.outbox = []
        self.ready = threading.Condition()
        self.closed = False
        self.call = pb_grpc.AggregationStub(self.channel).Contribute(self._requests())
        self.send([pb.ContributeRequest(hello=pb.Hello(protocol_version=1, client_id=client_id))])
        assert next(self.call).HasField("welcome")

    def _requests(self):
        while True:
            with self.ready:
                self.ready.wait_for(lambda: self.outbox or self.closed)
                if not self.outbox:
                    return
                request = self.outbox.pop(0)
            yield request

    def send(self, requests):
        with self.ready:
            self.outbox.extend(requests)
            self.ready.notify_all()

    def answer(self):
        return next(self.call)

    def cut(self):
        self.call.cancel()
        self.close()

    def close(self):
        with self.ready:
            self.closed = True
            self.ready.notify_all()
        self.channel.close()


def cut_ack(lb, a_metrics, b_metrics, aggregation_id, clients):
    moved = 0
    for n in range(1, clients + 1):
        before = (accepted(a_metrics), accepted(b_metrics))
        first = Stream(lb, f"client-{n}")
        first.send(update_requests(aggregation_id, n))
        deadline = time.time() + 20
        while (after := (accepted(a_metrics), accepted(b_metrics))) == before:
            assert time.time() < deadline, f"client {n}: no intermediate counted the update"
            time.sleep(0.005)
        first_on_a = after[0] > before[0]
        first.cut()  # the ack was sent; it is never read
        while True:
            retry = Stream(lb, f"client-{n}")
            rejected_before = (rejected(a_metrics), rejected(b_metrics))
            retry.send(update_requests(aggregation_id, n))
            answer = retry.answer()
            retry.close()
            assert answer.HasField("rejection"), f"client {n}: the retry was acked: counted twice"
            if answer.rejection.code != grpc.StatusCode.ABORTED.value[0]:
                break
            assert "has not delivered it yet" in answer.rejection.message, answer
            assert time.time() < deadline, f"client {n}: still not delivered to the root: {answer}"
            time.sleep(0.05)
        assert answer.rejection.code == grpc.StatusCode.ALREADY_EXISTS.value[0], answer
        assert f"client 'client-{n}' already contributed" in answer.rejection.message, answer
        rejected_after = (rejected(a_metrics), rejected(b_metrics))
        retry_on_a = rejected_after[0] > rejected_before[0]
        moved += first_on_a != retry_on_a
    print(f"cut-ack: {clients} clients, {moved} retries reached the other intermediate, all refused ALREADY_EXISTS")
    assert moved > 0, "no retry reached the other intermediate: the test proved nothing"


def both(a, b, aggregation_id, first, last):
    for n in range(first, last + 1):
        streams = [Stream(a, f"client-{n}"), Stream(b, f"client-{n}")]
        answers = [None, None]
        start = threading.Barrier(2)

        def run(i):
            start.wait()
            streams[i].send(update_requests(aggregation_id, n))
            answers[i] = streams[i].answer()

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in streams:
            s.close()
        acked = [x for x in answers if x.HasField("ack")]
        refused = [x for x in answers if x.HasField("rejection")]
        assert len(acked) == 1 and len(refused) == 1, f"client {n}: {answers}"
        assert refused[0].rejection.code in (grpc.StatusCode.ALREADY_EXISTS.value[0],
                                             grpc.StatusCode.ABORTED.value[0]), refused[0]
    print(f"both: clients {first}..{last} sent to both intermediates at once, each acked exactly once")


if __name__ == "__main__":
    if sys.argv[1] == "cut-ack":
        cut_ack(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
    elif sys.argv[1] == "both":
        both(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    else:
        sys.exit(f"unknown mode {sys.argv[1]}")
