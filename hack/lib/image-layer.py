#!/usr/bin/env python3
"""Writes a directory tree as one reproducible, gzipped image layer (used by hack/image.sh).

    image-layer.py ROOTFS OUT.tar.gz MTIME [PATH=UID:GID ...]

Reproducible: entries sorted by name, every mtime MTIME (SOURCE_DATE_EPOCH), owner 0:0
(or UID:GID for the PATHs given, e.g. home/nonroot=65532:65532), no user/group names,
mode bits as on disk (hack/image.sh sets them explicitly), gzip header without name or time.
GNU tar can do most of this too, but not a different owner for a few entries in one pass.
"""
import gzip
import os
import stat
import sys
import tarfile


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    root, out, mtime = sys.argv[1], sys.argv[2], int(sys.argv[3])
    owners = {}
    for arg in sys.argv[4:]:
        path, ids = arg.split("=", 1)
        uid, gid = ids.split(":", 1)
        owners[path.strip("/")] = (int(uid), int(gid))

    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            paths.append(os.path.relpath(os.path.join(dirpath, name), root))
    # Byte order, as GNU tar --sort=name in the C locale.
    paths.sort(key=lambda p: p.encode())
    unknown = set(owners) - set(paths)
    if unknown:
        sys.exit(f"image-layer: no such path in {root}: {', '.join(sorted(unknown))}")

    with open(out, "wb") as raw, gzip.GzipFile(
        filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9
    ) as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in paths:
            full = os.path.join(root, rel)
            st = os.lstat(full)
            info = tarfile.TarInfo(rel)
            info.mtime = mtime
            info.mode = stat.S_IMODE(st.st_mode)
            info.uid, info.gid = owners.get(rel, (0, 0))
            info.uname = info.gname = ""
            if stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(full)
                tar.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                info.size = st.st_size
                with open(full, "rb") as f:
                    tar.addfile(info, f)
            else:
                sys.exit(f"image-layer: {full}: not a file, directory or symlink")


if __name__ == "__main__":
    main()
