import pytest
import torch

from ring import config as C
from ring import grid as G
from ring import methods as M
from ring.objectives import build_objective
from ring.tables import published

from .helpers import TINY_PRETRAIN, pretrain_config


def test_every_method_is_implemented_and_builds_its_objective():
    for name, m in M.METHODS.items():
        assert m.implemented, name
        cfg = pretrain_config(name, kmeans_k=5, kmeans_clusterings=2)
        objective = build_objective(name, cfg, encoder=torch.nn.Linear(2, 2), n_train=300)
        assert (getattr(objective, "clusterings", None) is not None) == m.uses_kmeans, name


def test_display_names_are_the_papers_row_labels():
    rows = {**published()["table1_linear_eval"]["rows"], **published()["table2_lesions"]["rows"],
            **published()["table_la_variants"]["rows"]}
    assert {M.display_name(n) for n in M.METHODS if n not in M.VARIANT_ROWS} == set(rows)
    assert set(M.VARIANT_ROWS) <= set(M.METHODS) and not {M.display_name(n) for n in M.VARIANT_ROWS} & set(rows)


def test_lesions_are_defined_by_the_registry_not_the_grid():
    grid = G.from_dict("g", {"datasets": ["digits"], "methods": ["IRingNoAnneal", "IRingBall"], "seeds": [0],
                             "pretrain": {"all": {"bank_negatives": 1024}}})  # digits' bank holds 1347
    no_anneal = grid.pretrain_config("digits", "IRingNoAnneal", 0, "data")
    ball = grid.pretrain_config("digits", "IRingBall", 0, "data")
    assert no_anneal.ring_anneal == "none" and (no_anneal.ring_inner, no_anneal.ring_w_u) == (0.1, None)
    assert ball.ring_anneal == "linear" and (ball.ring_inner, ball.ring_w_u) == (None, 100.0)
    assert M.METHODS["LA"].sampler == "background" and M.METHODS["IRingCi"].sampler == "ring"
    assert M.METHODS["CMCCave"].encoder_files == ("encoder.pt", "encoder_ab.pt")


def test_a_grid_contradicting_a_lesion_fails_with_one_sentence():
    with pytest.raises(ValueError, match="Method IRingNoAnneal is defined by ring_anneal='none' but the grid sets"):
        G.from_dict("g", {"datasets": ["digits"], "methods": ["IRingNoAnneal"], "seeds": [0],
                          "pretrain": {"by_method": {"IRingNoAnneal": {"ring_anneal": "linear"}}}})


def test_a_hand_written_config_contradicting_its_method_is_refused(tmp_path):
    from ring.pretrain import Pretraining

    with pytest.raises(ValueError, match="Method IRingBall needs ring_inner=None"):
        # Built by hand, not by pretrain_config (which applies the method's values, as a grid does).
        Pretraining(C.PretrainConfig(method="IRingBall", **TINY_PRETRAIN), tmp_path)


def test_a_method_marked_unimplemented_fails_with_its_note(monkeypatch):
    monkeypatch.setitem(M.METHODS, "Future", M.Method("ir", ring=False, base="IR", implemented=False, note="issue #99"))
    with pytest.raises(NotImplementedError, match=r"Method Future is not implemented yet \(issue #99\)"):
        M.method("Future")


def test_new_kmeans_fields_leave_existing_cells_hashes_alone():
    ir = pretrain_config("IR")
    before = C.config_hash(ir)
    assert C.config_hash(pretrain_config("IR", kmeans_k=1000)) == before  # the default: not hashed
    assert C.config_hash(pretrain_config("IR", kmeans_k=7)) != before
