"""Branches of the data model: a folder per branch, each loaded once into its own toolbox.

A chat request may name a development branch (interface, "1. Chat", request body):
``activeBranchName`` says which version of the data model the queries run against, and
``isDefaultBranch`` whether that branch is the default one (default: true without
``activeBranchName``, false with it; it must be true when the main branch is named). Here a
branch is a folder of Cube YAML files beside the main one::

    chat_api/data_model/
        main/   the default (production) branch
        dev/    a development branch

Rules enforced by :meth:`BranchCatalog.toolbox_for` (each refusal a 400 naming the field):

- no ``activeBranchName``: the main branch; ``isDefaultBranch: false`` alone names no branch;
- the main branch named: ``isDefaultBranch`` must be true (said or defaulted);
- another branch named: it must exist (:class:`UnknownBranchError`) and ``isDefaultBranch``
  must not claim it is the default branch.

Branch names are matched against the folder names found under the root, never joined into a
path, so a name such as ``../x`` can only be unknown. Every branch shares the main toolbox's
warehouse and vocabulary (the data is the same); only the model differs, and the model reader's
index is built for the branch's own model. A branch's model is loaded on first use and kept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from chat_api.agent import Toolbox
from chat_api.errors import InvalidRequestError, UnknownBranchError
from chat_api.semantic.model import SemanticModel, load_model

logger = logging.getLogger(__name__)

ModelLoader = Callable[[Path], SemanticModel]


class BranchCatalog:
    """Branch name -> toolbox, loaded lazily and cached; safe to use from several threads.

    Args:
        root: The folder holding one folder per branch (``chat_api/data_model``).
        main: The default branch's folder name (``"main"``).
        base: The main branch's toolbox; other branches reuse its warehouse and vocabulary.
        load: Loads a branch folder into a model (tests may count calls).

    Raises:
        ValueError: ``main`` is not a branch folder under ``root``.
    """

    def __init__(
        self, root: Path, *, main: str, base: Toolbox, load: ModelLoader = load_model
    ) -> None:
        self.root = root
        self.main = main
        self._base = base
        self._load = load
        self._toolboxes: dict[str, Toolbox] = {main: base}
        self._lock = threading.Lock()
        if main not in self.names():
            raise ValueError(f"main branch {main!r} is not a folder of YAML files under {root}")

    def __repr__(self) -> str:
        return f"BranchCatalog(root={str(self.root)!r} main={self.main!r} loaded={self.loaded()})"

    def names(self) -> list[str]:
        """Returns: the branch names (sub-folders of ``root`` holding ``*.yml``/``*.yaml``)."""
        return sorted(
            folder.name
            for folder in self.root.iterdir()
            if folder.is_dir() and (any(folder.glob("*.yml")) or any(folder.glob("*.yaml")))
        )

    def loaded(self) -> list[str]:
        """Returns: the branches whose model is loaded, main included."""
        return sorted(self._toolboxes)

    def toolbox_for(self, branch: str | None, *, is_default_branch: bool) -> Toolbox:
        """The toolbox a chat request runs against.

        Args:
            branch: ``activeBranchName``, or None.
            is_default_branch: ``isDefaultBranch`` with the interface's default applied
                (``ChatRequest.effective_is_default_branch``).

        Returns:
            The branch's toolbox (the main one for ``branch`` None or the main name).

        Raises:
            InvalidRequestError: The flags contradict the branch (400).
            UnknownBranchError: No branch folder is called ``branch`` (400).
            ModelError: The branch's YAML files are invalid (a server fault).
        """
        if branch is None:
            if not is_default_branch:
                raise InvalidRequestError(
                    "isDefaultBranch: false needs activeBranchName naming a development branch"
                )
            return self._base
        if branch == self.main:
            if not is_default_branch:
                raise InvalidRequestError(
                    f"isDefaultBranch: must be true when activeBranchName is the main branch "
                    f"{self.main!r}"
                )
            return self._base
        known = self.names()
        if branch not in known:
            raise UnknownBranchError(branch, known=tuple(known))
        if is_default_branch:
            raise InvalidRequestError(
                f"isDefaultBranch: {branch!r} is not the default branch (that is {self.main!r}); "
                "send isDefaultBranch false or omit it"
            )
        return self._branch_toolbox(branch)

    def _branch_toolbox(self, branch: str) -> Toolbox:
        with self._lock:
            found = self._toolboxes.get(branch)
            if found is None:
                model = self._load(self.root / branch)
                found = self._base.for_model(model)
                self._toolboxes[branch] = found
                logger.info("branch loaded branch=%s views=%d", branch, len(model.views))
            return found
