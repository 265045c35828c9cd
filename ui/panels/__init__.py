"""Page sections that draw computed results (Streamlit calls), one module per page topic."""
