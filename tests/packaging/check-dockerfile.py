#!/usr/bin/env python3
"""Checks deploy/Dockerfile against scripts/install-deps.sh without a Docker engine (ctest:
deploy_dockerfile_deps), so that the image cannot drift from the tree again:

  1. The Dockerfile installs packages through scripts/install-deps.sh only: its build stage
     runs the `build` group before cmake, its runtime stage the `runtime` group; no apt-get
     install of its own.
  2. The build group covers the build: every system file the image's targets compiled (the
     depfiles of UCP_BUILD's library and server objects: headers, llhttp's C sources) belongs
     to a package of the group or to one they depend on (the dependency closure, as apt
     resolves it), or to the base image.
  3. The runtime group covers the run: every shared library the server binaries load (ldd)
     belongs to a package of the group, one they depend on, or the base image.

The base image (debian:12-slim) is modelled as apt's dependency closure plus the Essential
packages. Package names are this machine's (Debian 12, like the image); run elsewhere, a
package dpkg does not know is reported, not guessed.

  tests/packaging/check-dockerfile.py UCP_SOURCE UCP_BUILD BIN_DIR

Exit 0: consistent; 1: a problem (each printed); 77: nothing to check here (no dpkg, or the
build tree has no depfiles, e.g. Ninja consumed them).
"""

import glob
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def fail(problems):
    for problem in problems:
        print("FAIL: " + problem)
    sys.exit(1)


def group_packages(source, group):
    """The packages `scripts/install-deps.sh GROUP` installs, from the script itself."""
    script = os.path.join(source, "scripts", "install-deps.sh")
    function = subprocess.run(
        ["bash", "-c", 'eval "$(sed -n "/^packages_for()/,/^}/p" "$0")"; packages_for "$1"',
         script, group], capture_output=True, text=True, check=False)
    if function.returncode != 0:
        fail([f"scripts/install-deps.sh has no group '{group}': {function.stderr.strip()}"])
    return function.stdout.split()


def check_dockerfile_text(source):
    """Rule 1: which groups each stage installs, and no apt-get install of its own."""
    problems = []
    with open(os.path.join(source, "deploy", "Dockerfile"), encoding="utf-8") as f:
        text = f.read()
    # Continuation lines joined: one RUN is one instruction.
    text = re.sub(r"\\\n", " ", text)
    stages = re.split(r"^FROM\s", text, flags=re.MULTILINE)[1:]
    if len(stages) != 2:
        return [f"expected a build and a runtime stage, found {len(stages)}"]
    for stage, group, before in ((stages[0], "build", "cmake"), (stages[1], "runtime", None)):
        runs = [line for line in stage.splitlines() if line.startswith("RUN ")]
        body = "\n".join(runs)
        if re.search(r"apt(-get)?\s+install", body):
            problems.append(f"the {group} stage runs apt-get install itself: use "
                            f"scripts/install-deps.sh {group}")
        use = re.search(r"install-deps\.sh\s+" + group + r"\b", body)
        if not use:
            problems.append(f"the {group} stage does not run scripts/install-deps.sh {group}")
        elif before and body.find(before) != -1 and body.find(before) < use.start():
            problems.append(f"the {group} stage runs {before} before install-deps.sh {group}")
    return problems


def dpkg_owners(paths):
    """{path: package} for the files dpkg knows, trying /usr-merged spellings too."""
    owners = {}
    candidates = {}
    for path in paths:
        real = os.path.realpath(path)
        spellings = {path, real}
        for p in list(spellings):
            if p.startswith("/usr/lib/") or p.startswith("/usr/bin/"):
                spellings.add(p[4:])
            elif p.startswith("/lib/") or p.startswith("/bin/"):
                spellings.add("/usr" + p)
        for spelling in spellings:
            candidates[spelling] = path
    result = subprocess.run(["dpkg", "-S"] + sorted(candidates), capture_output=True, text=True,
                            check=False)
    for line in result.stdout.splitlines():
        package, _, file = line.partition(": ")
        if file in candidates and not package.startswith("diversion by"):
            for name in package.split(", "):
                owners.setdefault(candidates[file], name.split(":")[0])
    return owners


def closure(packages):
    """The installed packages `packages` pull in (Depends, Pre-Depends), themselves included."""
    seen = set()
    todo = list(packages)
    while todo:
        package = todo.pop()
        if package in seen:
            continue
        seen.add(package)
        query = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", package],
                               capture_output=True, text=True, check=False)
        for clause in query.stdout.split(","):
            # "a (>= 1) | b:any": the first alternative that is installed.
            for alternative in clause.split("|"):
                name = alternative.strip().split(" ")[0].split(":")[0]
                if not name:
                    continue
                status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name],
                                        capture_output=True, text=True, check=False)
                if "install ok installed" in status.stdout:
                    todo.append(name)
                    break
    return seen


def base_image():
    """What debian:12-slim holds: the Essential packages and what apt needs."""
    listing = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Essential}\n"],
                             capture_output=True, text=True, check=False)
    essential = [line.split()[0] for line in listing.stdout.splitlines()
                 if line.endswith(" yes")]
    return closure(essential + ["apt"])


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    source, build, bin_dir = sys.argv[1:]
    problems = check_dockerfile_text(source)
    if problems:
        fail(problems)
    if shutil.which("dpkg") is None:
        print("SKIP: no dpkg here: the package groups cannot be checked against the build")
        return SKIP

    base = base_image()
    build_group = group_packages(source, "build")
    runtime_group = group_packages(source, "runtime")
    unknown = [p for p in build_group + runtime_group
               if subprocess.run(["dpkg-query", "-W", p], capture_output=True,
                                 check=False).returncode != 0]
    if unknown:
        fail([f"install-deps.sh names {p}, which is not installed here: run "
              f"scripts/install-deps.sh build runtime first" for p in unknown])

    # Rule 2: the system files the library and server objects were compiled from.
    depfiles = [d for d in glob.glob(os.path.join(build, "**", "*.o.d"), recursive=True)
                if "_test.dir" not in d and "/tests/" not in d and "/bench/" not in d
                and "/examples/" not in d and "/client/" not in d]
    if not depfiles:
        print(f"SKIP: no depfiles under {build} (not built yet, or a generator that keeps none)")
        return SKIP
    system_files = set()
    for depfile in depfiles:
        with open(depfile, encoding="utf-8", errors="replace") as f:
            for token in f.read().replace("\\\n", " ").split():
                if token.startswith("/usr/") or token.startswith("/lib"):
                    system_files.add(os.path.normpath(token))
    owners = dpkg_owners(system_files)
    allowed = closure(build_group) | base
    problems = [f"{path} (package {owners[path]}) is used by the build but the build group "
                f"does not pull {owners[path]} in: add it to install-deps.sh build"
                for path in sorted(system_files) if path in owners and owners[path] not in allowed]
    problems += [f"{path}: no Debian package owns it (installed by hand?)"
                 for path in sorted(system_files) if path not in owners]

    # Rule 3: the shared libraries the servers load.
    libraries = set()
    for program in ("proactor_test", "http_server"):
        binary = os.path.join(bin_dir, program)
        if not os.path.exists(binary):
            problems.append(f"{binary} is missing: build it first")
            continue
        ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=False)
        for line in ldd.stdout.splitlines():
            match = re.search(r"=>\s+(/\S+)", line)
            if match:
                libraries.add(match.group(1))
    owners = dpkg_owners(libraries)
    allowed = closure(runtime_group) | base
    problems += [f"{path} (package {owners[path]}) is loaded by the servers but the runtime "
                 f"group does not pull {owners[path]} in: add it to install-deps.sh runtime"
                 for path in sorted(libraries) if path in owners and owners[path] not in allowed]
    problems += [f"{path}: no Debian package owns it" for path in sorted(libraries)
                 if path not in owners]
    if problems:
        fail(problems)
    print(f"deploy/Dockerfile: build group covers {len(system_files)} system files of "
          f"{len(depfiles)} objects, runtime group covers {len(libraries)} shared libraries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
