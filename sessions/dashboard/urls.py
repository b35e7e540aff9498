from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

app_name = ""
urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
