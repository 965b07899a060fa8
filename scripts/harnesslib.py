"""What scripts/crash-harness.py and scripts/storage-faults.py share: a fake machine of idle GPUs
(the tests' fake NVML), the environment that points gpulane at it and at a daemon of its own (own
socket, state folder, lease directory, config), and a ping over the daemon's socket."""
import json
import os
import socket
import struct
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def idle_gpus(n):
    """The fake NVML state of n idle H200s, cloned from the recorded one (as the tests' IdleGpus)."""
    with open(os.path.join(ROOT, "tests/fixtures/h200x2-2026-11-30/nvml_snapshot.json")) as f:
        state = json.load(f)
    base = dict(state["devices"][0])
    base.pop("index", None)
    devices = []
    for i in range(n):
        d = json.loads(json.dumps(base))
        d["uuid"] = "GPU-%08x-92ce-068a-58c5-7c2f58de6be6" % (0xd0000000 + i)
        d["pci_bus_id"] = "00000000:%02X:00.0" % (0x18 + 0x10 * i)
        d["minor"] = i
        d["processes"] = []
        total = d["memory"]["total"]
        d["memory"] = {"total": total, "used": 0, "free": total}
        d["util"] = {"gpu": 0, "memory": 0}
        devices.append(d)
    state["devices"] = devices
    return state


def machine_env(build, folder, state_dir, tag_variable, tag, gpus=4, extra=None):
    """Writes the fake NVML state and an empty config under `folder`; the environment for gpulane."""
    os.makedirs(os.path.join(folder, "leases"), mode=0o700, exist_ok=True)
    with open(os.path.join(folder, "nvml.json"), "w") as f:
        json.dump(idle_gpus(gpus), f)
    open(os.path.join(folder, "config.toml"), "a").close()
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update({
        "GPULANE_NVML_LIBRARY": os.path.join(ROOT, build, "fake_nvml/current/libnvidia-ml.so.1"),
        "FAKE_NVML_STATE": os.path.join(folder, "nvml.json"),
        "GPULANE_LEASE_DIR": os.path.join(folder, "leases"),
        "GPULANE_SOCKET": os.path.join(folder, "gpulane.sock"),
        "GPULANE_STATE_DIR": state_dir,
        "GPULANE_CONFIG": os.path.join(folder, "config.toml"),
        "XDG_CONFIG_HOME": os.path.join(folder, "xdg"),
        "GPULANE_SYSTEM_DAEMON": "0",
        "NO_COLOR": "1",
        tag_variable: tag,
    })
    env.update(extra or {})
    return env


def call(socket_path, request, timeout=2.0):
    """One request over the daemon's socket; the reply, or None (no daemon, no reply in time)."""
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(socket_path)
        body = json.dumps(dict({"v": 2}, **request)).encode()
        s.sendall(struct.pack(">I", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                return None
            data += chunk
        s.close()
        return json.loads(data[4:4 + struct.unpack(">I", data[:4])[0]])
    except (OSError, ValueError):
        return None


def ping(socket_path, timeout=2.0):
    """The daemon's pid when one answers a ping on `socket_path`, else None."""
    reply = call(socket_path, {"op": "ping"}, timeout)
    return reply.get("pid") if reply and reply.get("ok") else None


def gpulane(binary, env, args, cwd, timeout=60):
    return subprocess.run([binary] + args, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
