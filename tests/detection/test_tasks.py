"""ring.detection.tasks: the old name of ring.plan.detection_tasks, the very same module object."""

import ring.detection.tasks
import ring.plan.detection_tasks


def test_the_old_name_is_the_same_module_so_a_patch_through_either_name_is_seen_by_both(monkeypatch):
    assert ring.detection.tasks is ring.plan.detection_tasks
    monkeypatch.setitem(ring.detection.tasks.TASKS, "extra", ring.plan.detection_tasks.TASKS["coco_kp"])
    assert ring.plan.detection_tasks.task("extra") is ring.plan.detection_tasks.TASKS["coco_kp"]
