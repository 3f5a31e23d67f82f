"""The Artemis launch kit: node instances copied from a template, and the class archive made once."""

from __future__ import annotations

from pathlib import Path

import pytest

from cck.conformance.artemis.distribution import Distribution
from cck.conformance.targets import _artemis_launch as launch
from cck.conformance.targets._artemis_launch import LaunchKit, instantiate, prepare_launch_kit


def _fake_template(root: Path, instance: Path, data: Path) -> Path:
    """The files ``artemis create`` writes that name the instance and data paths (shortened), and one that does not."""
    (instance / "bin").mkdir(parents=True)
    (instance / "etc").mkdir()
    (instance / "bin" / "artemis").write_text(f"ARTEMIS_INSTANCE_ETC='{instance}/etc'\n")
    (instance / "etc" / "artemis.profile").write_text(
        f"ARTEMIS_HOME='/opt/artemis'\nARTEMIS_INSTANCE='{instance}'\nARTEMIS_DATA_DIR='{data}'\n"
        f"ARTEMIS_OOME_DUMP='{instance}/log/oom_dump.hprof'\n")
    (instance / "etc" / "bootstrap.xml").write_text(f'<server configuration="file:{instance}/etc//broker.xml"/>\n')
    (instance / "etc" / "management.xml").write_text("<management-context/>\n")
    return instance


def test_an_instance_names_its_own_paths_not_the_templates(tmp_path: Path) -> None:
    # made in a staging directory and moved: the files still name the staging path, which the profile tells
    template = _fake_template(tmp_path, tmp_path / "template.123.partial", tmp_path / "template-data")
    template = template.rename(tmp_path / "template")
    node, data = tmp_path / "node0" / "instance", tmp_path / "node0" / "data"

    instantiate(LaunchKit(template, None), node, data)

    profile = (node / "etc" / "artemis.profile").read_text()
    assert f"ARTEMIS_INSTANCE='{node}'\n" in profile
    assert f"ARTEMIS_DATA_DIR='{data}'\n" in profile
    assert f"ARTEMIS_OOME_DUMP='{node}/log/oom_dump.hprof'" in profile
    assert (node / "bin" / "artemis").read_text() == f"ARTEMIS_INSTANCE_ETC='{node}/etc'\n"
    assert f"file:{node}/etc//broker.xml" in (node / "etc" / "bootstrap.xml").read_text()
    assert (node / "etc" / "management.xml").read_text() == "<management-context/>\n"
    assert "template" not in "".join(p.read_text() for p in node.rglob("*") if p.is_file())


def test_a_template_without_its_paths_is_refused(tmp_path: Path) -> None:
    template = tmp_path / "template"
    (template / "etc").mkdir(parents=True)
    (template / "etc" / "artemis.profile").write_text("ARTEMIS_HOME='/opt/artemis'\n")
    with pytest.raises(launch.LaunchError, match="ARTEMIS_INSTANCE"):
        instantiate(LaunchKit(template, None), tmp_path / "node", tmp_path / "data")


def test_the_template_and_archive_are_made_once_and_a_failed_training_is_not_repeated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []

    def create(home: Path, instance: Path, data: Path, java_args: str, log: Path) -> None:
        made.append("create")
        _fake_template(tmp_path, instance, data)
        (instance / "bin" / "artemis").write_text(f"ARTEMIS_INSTANCE_ETC='{instance}/etc'\n")

    def train(kit: LaunchKit, archive: Path, java_args: str, render: launch.TrainingEtc) -> bool:
        made.append("train")
        return False

    monkeypatch.setattr(launch, "_create", create)
    monkeypatch.setattr(launch, "_train", train)
    dist = Distribution("9.9.9", 136, tmp_path / "cache", tmp_path / "home")

    first = prepare_launch_kit(dist, "-Xmx64m", lambda etc, data, port: None)
    second = prepare_launch_kit(dist, "-Xmx64m", lambda etc, data, port: None)

    assert made == ["create", "train"]
    assert first == second == LaunchKit(tmp_path / "cache" / "instances" / "template", None)
    assert first.java_args_append() == ""
