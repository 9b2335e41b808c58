from __future__ import annotations

from django.urls import URLPattern, path

from annotation import compare_views, disagreement_views, reviewer_views, views

app_name = "annotation"
urlpatterns: list[URLPattern] = [
    path("trajectories/<uuid:trajectory_id>/steps/<int:number>/labels/", views.add_step_label, name="step-label"),
    path("trajectories/<uuid:trajectory_id>/review/", views.add_review_mark, name="review-mark"),
    path("trajectories/<uuid:trajectory_id>/flags/clear/", views.clear_trajectory_flags, name="clear-flags"),
    path("marked/", views.marked, name="marked"),
    # Pairwise comparisons: the queue, the review screen, and the researchers' set pages.
    path("", compare_views.queue_page, name="queue"),
    path("guidelines/", compare_views.guidelines, name="guidelines"),
    path("reviewers/", reviewer_views.reviewer_list, name="reviewers"),
    path("reviewers/<str:username>/", reviewer_views.reviewer_detail, name="reviewer"),
    path("sets/", compare_views.set_list, name="sets"),
    path("sets/new/", compare_views.set_new, name="set-new"),
    path("sets/<slug:name>/", compare_views.set_detail, name="set"),
    path("sets/<slug:name>/next/", compare_views.next_pair, name="next"),
    path("sets/<slug:name>/bulk/", compare_views.set_bulk, name="set-bulk"),
    path("compare/<int:pk>/", compare_views.compare, name="compare"),
    path("compare/<int:pk>/skip/", compare_views.skip_pair, name="skip"),
    path("compare/<int:pk>/undo/", compare_views.undo_verdict, name="undo"),
    path("compare/<int:pk>/trajectory/<str:side>/", compare_views.compare_trajectory, name="compare-trajectory"),
    path("compare/<int:pk>/diff/<str:side>/", compare_views.compare_diff, name="compare-diff"),
    # Agreement figures and disagreements of a set (disagreement_views).
    path("sets/<slug:name>/agreement/", disagreement_views.agreement, name="set-agreement"),
    path("sets/<slug:name>/disagreements/", disagreement_views.disagreement_list, name="set-disagreements"),
    path("sets/<slug:name>/disagreements/<int:pk>/", disagreement_views.disagreement_detail, name="disagreement"),
]
