from django.urls import path

app_name = "tasks"

urlpatterns: list = []
