#!/usr/bin/env python3
"""Reads a torch.save zip file the way Python's torch.load does, with the
standard library only (PyTorch cannot be installed where the tests run).

    read_torch_save.py FILE OUT_DIR

The protocol followed is torch.load's for the zip format: <prefix>/data.pkl
is a pickle whose tensors are torch._utils._rebuild_tensor_v2(storage,
storage_offset, size, stride, requires_grad, backward_hooks) and whose
storages are persistent ids ('storage', torch.<Type>Storage, key, location,
numel) naming <prefix>/data/<key>. Globals outside that protocol are refused,
as torch.load(weights_only=True) refuses them.

Writes OUT_DIR/index.json: [{"name", "dtype", "shape", "file"}], and each
tensor's elements in row-major order (little-endian) to OUT_DIR/<file>.
Exits 1 with a message on anything it does not understand.
"""
import json
import os
import pickle
import struct
import sys
import zipfile

ELEMENT = {  # storage type -> (dtype name, struct code, bytes)
    "FloatStorage": ("float32", "f", 4),
    "DoubleStorage": ("float64", "d", 8),
    "HalfStorage": ("float16", "e", 2),
    "BFloat16Storage": ("bfloat16", "H", 2),
    "LongStorage": ("int64", "q", 8),
    "IntStorage": ("int32", "i", 4),
}


class StorageType:
    def __init__(self, name):
        self.name = name


class Storage:
    def __init__(self, kind, data):
        self.kind = kind
        self.data = data


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)

    def row_major_bytes(self):
        _, code, width = ELEMENT[self.storage.kind]
        count = 1
        for s in self.size:
            count *= s
        contiguous, expect = True, 1
        for s, st in reversed(list(zip(self.size, self.stride))):
            if s != 1 and st != expect:
                contiguous = False
            expect *= s
        if contiguous:
            return self.storage.data[self.offset * width:(self.offset + count) * width]
        out = bytearray()
        index = [0] * len(self.size)
        for _ in range(count):
            pos = self.offset + sum(i * st for i, st in zip(index, self.stride))
            out += self.storage.data[pos * width:(pos + 1) * width]
            for d in reversed(range(len(index))):
                index[d] += 1
                if index[d] < self.size[d]:
                    break
                index[d] = 0
        return bytes(out)


def rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, *rest):
    return Tensor(storage, storage_offset, size, stride)


class TorchUnpickler(pickle.Unpickler):
    def __init__(self, file, archive, prefix):
        super().__init__(file)
        self.archive, self.prefix = archive, prefix

    def find_class(self, module, name):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return rebuild_tensor_v2
        if (module, name) == ("collections", "OrderedDict"):
            import collections
            return collections.OrderedDict
        if (module, name) == ("torch.jit._pickle", "restore_type_tag"):
            return lambda value, type_str: value
        if module == "torch" and name in ELEMENT:
            return StorageType(name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not part of a state dict")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unexpected persistent id {pid!r}")
        _, kind, key, _location, numel = pid
        data = self.archive.read(f"{self.prefix}/data/{key}")
        width = ELEMENT[kind.name][2]
        if len(data) != numel * width:
            raise pickle.UnpicklingError(f"storage {key}: {len(data)} bytes, expected {numel} x {width}")
        return Storage(kind.name, data)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, out = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(path) as archive:
        pkls = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if len(pkls) != 1:
            sys.exit(f"{path}: expected one <prefix>/data.pkl, found {pkls}")
        prefix = pkls[0][: -len("/data.pkl")]
        with archive.open(pkls[0]) as f:
            state = TorchUnpickler(f, archive, prefix).load()
    if not isinstance(state, dict):
        sys.exit(f"{path}: holds a {type(state).__name__}, not a dict")
    os.makedirs(out, exist_ok=True)
    index = []
    for i, (name, t) in enumerate(state.items()):
        if not isinstance(name, str) or not isinstance(t, Tensor):
            sys.exit(f"{path}: entry {name!r} is not name -> tensor")
        file = f"{i}.bin"
        with open(os.path.join(out, file), "wb") as f:
            f.write(t.row_major_bytes())
        index.append({"name": name, "dtype": ELEMENT[t.storage.kind][0], "shape": list(t.size), "file": file})
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f)
    print(f"{len(index)} tensors")


if __name__ == "__main__":
    main()
