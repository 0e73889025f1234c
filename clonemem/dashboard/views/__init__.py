"""The dashboard's pages: one module per page, each run by Streamlit as a script (see ``clonemem.dashboard.PAGES``)."""
