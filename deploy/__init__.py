"""Hosted deployment: replicas behind nginx (replicas.py), images (Dockerfile.gpu), docker-compose.yml."""
